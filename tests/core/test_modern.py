"""The modern-era (2026-07-28) rules of :mod:`mcp_sansio._modern`. No I/O."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mcp_sansio import _json
from mcp_sansio import _modern as m
from mcp_sansio._errors import ErrorCode, ErrorData, LocalProtocolError, RemoteProtocolError

SPEC = Path(__file__).resolve().parents[2].parent / "shared" / "spec"
SCHEMA_DIR = SPEC / "schema" / "2026-07-28"
V = "2026-07-28"
KEY = b"k" * 32
SERVER_INFO = {"name": "test-server", "version": "1.0.0"}
CLIENT_INFO = {"name": "test-client", "version": "0.1"}


# ---------------------------------------------------------------------------------------------
# Schema helpers
# ---------------------------------------------------------------------------------------------


@functools.cache
def _defs() -> dict[str, Any]:
    schema = _json.loads((SCHEMA_DIR / "schema.json").read_bytes())
    defs: dict[str, Any] = schema["$defs"]
    return defs


@functools.cache
def _validator(name: str) -> Any:
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": _defs()})


def assert_valid(name: str, instance: Any) -> None:
    _validator(name).validate(instance)


def assert_error_valid(name: str, error: ErrorData) -> None:
    assert_valid(name, {"jsonrpc": "2.0", "id": 1, "error": error.to_wire()})


def example(type_name: str, file: str) -> Any:
    return _json.loads((SCHEMA_DIR / "examples" / type_name / file).read_bytes())


def meta(**overrides: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        m.PROTOCOL_VERSION_KEY: V,
        m.CLIENT_CAPABILITIES_KEY: {},
        m.CLIENT_INFO_KEY: CLIENT_INFO,
    }
    out.update(overrides)
    return out


def validate(params: Any, method: str = "tools/call", **kw: Any) -> m.Envelope | ErrorData:
    kw.setdefault("supported_versions", [V])
    return m.validate_envelope(method, params, **kw)


def assert_invalid_params(result: object) -> ErrorData:
    assert isinstance(result, ErrorData)
    assert result.code == ErrorCode.INVALID_PARAMS
    assert_valid("InvalidParamsError", result.to_wire())
    return result


# ---------------------------------------------------------------------------------------------
# 1-2. _meta keys and the client envelope
# ---------------------------------------------------------------------------------------------


def test_meta_key_constants_match_the_schema() -> None:
    request_meta = _defs()["RequestMetaObject"]["properties"]
    for key in (
        m.PROTOCOL_VERSION_KEY,
        m.CLIENT_CAPABILITIES_KEY,
        m.CLIENT_INFO_KEY,
        m.LOG_LEVEL_KEY,
        m.PROGRESS_TOKEN_KEY,
    ):
        assert key in request_meta
    assert m.SERVER_INFO_KEY in _defs()["ResultMetaObject"]["properties"]
    assert m.SUBSCRIPTION_ID_KEY in _defs()["NotificationMetaObject"]["properties"]
    assert (m.OTEL_TRACEPARENT_KEY, m.OTEL_TRACESTATE_KEY, m.OTEL_BAGGAGE_KEY) == (
        "traceparent",
        "tracestate",
        "baggage",
    )
    assert m.LOG_LEVELS == (
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    )
    assert set(m.LOG_LEVELS) == set(_defs()["LoggingLevel"]["enum"])
    assert set(_defs()["CacheableResult"]["properties"]["cacheScope"]["enum"]) == m.CACHE_SCOPES


def test_build_request_meta_full_and_valid() -> None:
    out = m.build_request_meta(
        protocol_version=V,
        client_capabilities={"elicitation": {}},
        client_info=CLIENT_INFO,
        log_level="warning",
        progress_token="tok",
        extra={"traceparent": "00-abc-def-01", "com.example/x": 1},
    )
    assert out == {
        "traceparent": "00-abc-def-01",
        "com.example/x": 1,
        m.PROTOCOL_VERSION_KEY: V,
        m.CLIENT_CAPABILITIES_KEY: {"elicitation": {}},
        m.CLIENT_INFO_KEY: CLIENT_INFO,
        m.LOG_LEVEL_KEY: "warning",
        m.PROGRESS_TOKEN_KEY: "tok",
    }
    assert_valid("RequestMetaObject", out)


def test_build_request_meta_minimal() -> None:
    out = m.build_request_meta(protocol_version=V, client_capabilities={}, client_info=None)
    assert out == {m.PROTOCOL_VERSION_KEY: V, m.CLIENT_CAPABILITIES_KEY: {}}
    assert_valid("RequestMetaObject", out)
    with_int_token = m.build_request_meta(
        protocol_version=V, client_capabilities={}, client_info=None, progress_token=7
    )
    assert with_int_token[m.PROGRESS_TOKEN_KEY] == 7


@pytest.mark.parametrize(
    "kwargs",
    [
        {"protocol_version": ""},
        {"protocol_version": 2026},
        {"client_capabilities": None},
        {"client_info": "me"},
        {"log_level": "verbose"},
        {"log_level": 3},
        {"progress_token": True},
        {"progress_token": 1.5},
        {"extra": {m.PROTOCOL_VERSION_KEY: "x"}},
        {"extra": {"progressToken": 1}},
    ],
)
def test_build_request_meta_rejects_misuse(kwargs: dict[str, Any]) -> None:
    args: dict[str, Any] = {
        "protocol_version": V,
        "client_capabilities": {},
        "client_info": CLIENT_INFO,
    }
    args.update(kwargs)
    with pytest.raises(LocalProtocolError):
        m.build_request_meta(**args)


def test_attach_meta_merges_without_mutating() -> None:
    params = {"name": "t", "_meta": {"traceparent": "tp", m.PROTOCOL_VERSION_KEY: "old"}}
    snapshot = orjson.dumps(params)
    envelope = {m.PROTOCOL_VERSION_KEY: V, m.CLIENT_CAPABILITIES_KEY: {}}
    out = m.attach_meta(params, envelope)
    assert out == {
        "name": "t",
        "_meta": {"traceparent": "tp", m.PROTOCOL_VERSION_KEY: V, m.CLIENT_CAPABILITIES_KEY: {}},
    }
    assert orjson.dumps(params) == snapshot
    assert out["_meta"] is not envelope
    assert_valid("CallToolRequestParams", out)


def test_attach_meta_none_and_no_meta() -> None:
    envelope = {m.PROTOCOL_VERSION_KEY: V}
    out = m.attach_meta(None, envelope)
    assert out == {"_meta": envelope}
    assert out["_meta"] is not envelope
    assert m.attach_meta({"a": 1}, envelope) == {"a": 1, "_meta": envelope}


def test_attach_meta_rejects_non_mappings() -> None:
    with pytest.raises(LocalProtocolError):
        m.attach_meta([], {})  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        m.attach_meta({"_meta": "x"}, {})


def test_is_modern_request() -> None:
    assert m.is_modern_request({"_meta": meta()})
    assert m.is_modern_request({"_meta": {m.PROTOCOL_VERSION_KEY: 5}})
    assert not m.is_modern_request({"_meta": {}})
    assert not m.is_modern_request({"_meta": "x"})
    assert not m.is_modern_request({})
    assert not m.is_modern_request(None)


# ---------------------------------------------------------------------------------------------
# 3. The validation ladder
# ---------------------------------------------------------------------------------------------


def test_envelope_accepted() -> None:
    full = meta(**{m.LOG_LEVEL_KEY: "info", "progressToken": 3, "traceparent": "tp"})
    env = validate({"name": "x", "_meta": full})
    assert isinstance(env, m.Envelope)
    assert env.protocol_version == V
    assert env.client_capabilities == {}
    assert env.client_info == CLIENT_INFO
    assert env.log_level == "info"
    assert env.progress_token == 3
    assert env.meta == full
    assert env.meta["traceparent"] == "tp"


def test_envelope_minimal() -> None:
    minimal = {m.PROTOCOL_VERSION_KEY: V, m.CLIENT_CAPABILITIES_KEY: {"roots": {}}}
    env = validate({"_meta": minimal}, "server/discover")
    assert isinstance(env, m.Envelope)
    assert (env.client_info, env.log_level, env.progress_token) == (None, None, None)
    assert env.client_capabilities == {"roots": {}}


def test_envelope_accepts_the_spec_examples() -> None:
    seen = 0
    for path in sorted((SCHEMA_DIR / "examples").glob("*Request/*.json")):
        request = _json.loads(path.read_bytes())
        if request.get("method") in m.INPUT_REQUEST_METHODS:
            continue  # server-to-client input requests carry no envelope
        env = validate(request["params"], request["method"])
        assert isinstance(env, m.Envelope), path
        seen += 1
    assert seen >= 5


@pytest.mark.parametrize(
    "params",
    [
        None,
        [],
        "x",
        {},
        {"_meta": None},
        {"_meta": []},
        {"_meta": {m.CLIENT_CAPABILITIES_KEY: {}}},
        {"_meta": {m.PROTOCOL_VERSION_KEY: 20260728, m.CLIENT_CAPABILITIES_KEY: {}}},
        {"_meta": {m.PROTOCOL_VERSION_KEY: V}},
        {"_meta": {m.PROTOCOL_VERSION_KEY: V, m.CLIENT_CAPABILITIES_KEY: []}},
        {"_meta": meta(**{m.CLIENT_INFO_KEY: "me"})},
        {"_meta": meta(**{m.LOG_LEVEL_KEY: "verbose"})},
        {"_meta": meta(**{m.LOG_LEVEL_KEY: None})},
        {"_meta": meta(**{m.LOG_LEVEL_KEY: ["info"]})},
        {"_meta": meta(progressToken=True)},
        {"_meta": meta(progressToken=None)},
        {"_meta": meta(progressToken=1.5)},
    ],
)
def test_envelope_malformed_is_invalid_params(params: Any) -> None:
    err = validate(params)
    assert isinstance(err, ErrorData)
    assert err.code == ErrorCode.INVALID_PARAMS
    assert err.message
    assert_valid("InvalidParamsError", err.to_wire())


def test_envelope_unsupported_version() -> None:
    params = {"_meta": meta(**{m.PROTOCOL_VERSION_KEY: "1900-01-01"})}
    err = validate(params, supported_versions=[V, "2025-11-25"])
    assert isinstance(err, ErrorData)
    assert err.code == -32022
    assert err.message == "Unsupported protocol version"
    assert err.data == {"supported": [V, "2025-11-25"], "requested": "1900-01-01"}
    assert_error_valid("UnsupportedProtocolVersionError", err)


def test_envelope_versions_are_a_set_not_dates() -> None:
    # A "newer" date is not accepted just because it sorts later.
    err = validate({"_meta": meta(**{m.PROTOCOL_VERSION_KEY: "2099-01-01"})})
    assert isinstance(err, ErrorData) and err.code == -32022
    # A dual-era server lists legacy versions as supported but accepts only modern ones inline.
    err = validate(
        {"_meta": meta(**{m.PROTOCOL_VERSION_KEY: "2025-11-25"})},
        supported_versions=[V, "2025-11-25"],
        stateless_versions=[V],
    )
    assert isinstance(err, ErrorData)
    assert err.data == {"supported": [V, "2025-11-25"], "requested": "2025-11-25"}
    ok = validate({"_meta": meta()}, supported_versions=[V, "2025-11-25"], stateless_versions={V})
    assert isinstance(ok, m.Envelope)


def test_envelope_ladder_order() -> None:
    # Missing capabilities beats an unsupported version.
    err = validate({"_meta": {m.PROTOCOL_VERSION_KEY: "1900-01-01"}})
    assert isinstance(err, ErrorData) and err.code == ErrorCode.INVALID_PARAMS
    # An unsupported version beats a bad log level, client info or progress token.
    bad_rest = meta(
        **{
            m.PROTOCOL_VERSION_KEY: "1900-01-01",
            m.LOG_LEVEL_KEY: "nope",
            m.CLIENT_INFO_KEY: 1,
            "progressToken": False,
        }
    )
    err = validate({"_meta": bad_rest})
    assert isinstance(err, ErrorData) and err.code == -32022


def test_envelope_removed_methods() -> None:
    err = validate({"_meta": meta()}, "ping")
    assert isinstance(err, ErrorData) and err.code == ErrorCode.METHOD_NOT_FOUND
    assert err.data is None
    err = validate(None, "initialize", supported_versions=[V, "2025-11-25"])
    assert isinstance(err, ErrorData) and err.code == ErrorCode.METHOD_NOT_FOUND
    assert V in err.message and "2025-11-25" in err.message
    assert err.data == {"supported": [V, "2025-11-25"]}
    assert_valid("MethodNotFoundError", err.to_wire())


def test_removed_methods_are_those_the_changelog_removed() -> None:
    def methods(revision: str) -> set[str]:
        defs = _json.loads((SPEC / "schema" / revision / "schema.json").read_bytes())["$defs"]
        return {
            d["properties"]["method"]["const"]
            for d in defs.values()
            if "const" in d.get("properties", {}).get("method", {})
        }

    removed = methods("2025-11-25") - methods("2026-07-28")
    # tasks/get and tasks/cancel moved to the io.modelcontextprotocol/tasks extension.
    assert removed - {"tasks/get", "tasks/cancel"} == m.MODERN_REMOVED_METHODS
    assert not (m.MODERN_REMOVED_METHODS & methods("2026-07-28"))
    assert methods("2026-07-28") >= (
        (m.CACHEABLE_METHODS - m.EXTENSION_CACHEABLE_METHODS)
        | m.MODERN_INPUT_REQUIRED_METHODS
        | m.INPUT_REQUEST_METHODS
    )
    assert not (m.EXTENSION_CACHEABLE_METHODS & methods("2026-07-28"))
    assert m.SUBSCRIPTIONS_LISTEN_METHOD in methods("2026-07-28")
    assert m.SUBSCRIPTIONS_ACKNOWLEDGED_METHOD in methods("2026-07-28")


# ---------------------------------------------------------------------------------------------
# Client capabilities
# ---------------------------------------------------------------------------------------------


def test_capabilities_satisfied() -> None:
    caps: dict[str, Any] = {"elicitation": {"url": {}}, "sampling": {"tools": {}}, "roots": {}}
    assert m.check_client_capabilities(caps, {}) is None
    assert m.check_client_capabilities(caps, {"sampling": {}}) is None
    assert m.check_client_capabilities(caps, {"sampling": {"tools": {}}, "roots": {}}) is None
    assert m.check_client_capabilities(caps, {"elicitation": {"url": {}}}) is None
    # An empty elicitation object means form mode only.
    assert m.check_client_capabilities({"elicitation": {}}, {"elicitation": {"form": {}}}) is None


def test_capabilities_missing() -> None:
    err = m.check_client_capabilities({}, {"elicitation": {}})
    assert isinstance(err, ErrorData)
    assert err.code == -32021
    assert err.data == {"requiredCapabilities": {"elicitation": {}}}
    assert "elicitation" in err.message
    assert_error_valid("MissingRequiredClientCapabilityError", err)


def test_capabilities_missing_nested_lists_only_what_is_missing() -> None:
    caps: dict[str, Any] = {"sampling": {}, "elicitation": {}, "roots": {}}
    required: dict[str, Any] = {
        "sampling": {"tools": {}},
        "elicitation": {"url": {}, "form": {}},
        "roots": {},
        "extensions": {"io.modelcontextprotocol/ui": {}},
    }
    err = m.check_client_capabilities(caps, required)
    assert isinstance(err, ErrorData)
    assert err.data == {
        "requiredCapabilities": {
            "sampling": {"tools": {}},
            "elicitation": {"url": {}},
            "extensions": {"io.modelcontextprotocol/ui": {}},
        }
    }
    assert_error_valid("MissingRequiredClientCapabilityError", err)
    # A capability declared with the wrong JSON type is not declared.
    err = m.check_client_capabilities({"roots": True}, {"roots": {}})
    assert isinstance(err, ErrorData) and err.data == {"requiredCapabilities": {"roots": {}}}


def test_capabilities_required_must_be_mappings() -> None:
    with pytest.raises(LocalProtocolError):
        m.check_client_capabilities({}, {"roots": True})


def test_required_capabilities_for_input_requests() -> None:
    requests: dict[str, dict[str, Any]] = {
        "a": {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {}}},
        "b": {"method": "elicitation/create", "params": {"mode": "url", "url": "https://x"}},
        "c": {
            "method": "sampling/createMessage",
            "params": {"messages": [], "maxTokens": 1, "tools": [], "includeContext": "none"},
        },
        "d": {"method": "roots/list"},
    }
    assert m.required_capabilities_for_input_requests(requests) == {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {"tools": {}},
        "roots": {},
    }
    ctx = {"s": {"method": "sampling/createMessage", "params": {"includeContext": "thisServer"}}}
    assert m.required_capabilities_for_input_requests(ctx) == {"sampling": {"context": {}}}
    assert m.required_capabilities_for_input_requests({}) == {}
    with pytest.raises(LocalProtocolError):
        m.required_capabilities_for_input_requests({"x": {"method": "tools/call"}})
    with pytest.raises(LocalProtocolError):
        m.required_capabilities_for_input_requests({"x": "roots/list"})  # type: ignore[dict-item]


# ---------------------------------------------------------------------------------------------
# 5. Results
# ---------------------------------------------------------------------------------------------

LIST_BODIES: dict[str, tuple[str, dict[str, Any]]] = {
    "tools/list": ("ListToolsResult", {"tools": []}),
    "prompts/list": ("ListPromptsResult", {"prompts": []}),
    "resources/list": ("ListResourcesResult", {"resources": []}),
    "resources/templates/list": ("ListResourceTemplatesResult", {"resourceTemplates": []}),
    "resources/read": (
        "ReadResourceResult",
        {"contents": [{"uri": "file:///a", "text": "hi"}]},
    ),
}


def test_cacheable_methods_are_the_cacheable_results() -> None:
    core = m.CACHEABLE_METHODS - m.EXTENSION_CACHEABLE_METHODS
    assert set(LIST_BODIES) | {"server/discover"} == core
    assert {"skills/list", "skills/get"} == m.EXTENSION_CACHEABLE_METHODS
    for name, _ in LIST_BODIES.values():
        required = set(_defs()[name]["required"])
        assert {"ttlMs", "cacheScope"} <= required


@pytest.mark.parametrize("method", sorted(LIST_BODIES))
def test_decorate_cacheable_defaults(method: str) -> None:
    schema_name, body = LIST_BODIES[method]
    out = m.decorate_result(method, body, server_info=SERVER_INFO)
    assert out["resultType"] == "complete"
    assert out["_meta"] == {m.SERVER_INFO_KEY: SERVER_INFO}
    assert out["ttlMs"] == m.DEFAULT_TTL_MS == 0
    assert out["cacheScope"] == m.DEFAULT_CACHE_SCOPE == "private"
    assert "resultType" not in body  # not mutated
    assert_valid(schema_name, out)
    assert_valid("CacheableResult", out)


def test_decorate_configured_and_per_result_precedence() -> None:
    out = m.decorate_result(
        "tools/list", {"tools": []}, server_info=None, ttl_ms=60_000, cache_scope="public"
    )
    assert (out["ttlMs"], out["cacheScope"]) == (60_000, "public")
    assert "_meta" not in out
    assert_valid("ListToolsResult", out)
    own = {"tools": [], "ttlMs": 5, "cacheScope": "private", "_meta": {"com.example/a": 1}}
    out = m.decorate_result(
        "tools/list", own, server_info=SERVER_INFO, ttl_ms=60_000, cache_scope="public"
    )
    assert (out["ttlMs"], out["cacheScope"]) == (5, "private")
    assert out["_meta"] == {m.SERVER_INFO_KEY: SERVER_INFO, "com.example/a": 1}
    assert own["_meta"] == {"com.example/a": 1}
    # A server info the handler already set is kept.
    theirs = {"content": [], "_meta": {m.SERVER_INFO_KEY: {"name": "other", "version": "2"}}}
    out = m.decorate_result("tools/call", theirs, server_info=SERVER_INFO)
    assert out["_meta"][m.SERVER_INFO_KEY]["name"] == "other"


@pytest.mark.parametrize(
    ("method", "schema_name", "body"),
    [
        ("tools/call", "CallToolResult", {"content": []}),
        ("prompts/get", "GetPromptResult", {"messages": []}),
        ("completion/complete", "CompleteResult", {"completion": {"values": []}}),
    ],
)
def test_decorate_not_cacheable(method: str, schema_name: str, body: dict[str, Any]) -> None:
    out = m.decorate_result(method, body, server_info=SERVER_INFO, ttl_ms=10, cache_scope="public")
    assert out["resultType"] == "complete"
    assert "ttlMs" not in out and "cacheScope" not in out
    assert_valid(schema_name, out)


def test_decorate_input_required() -> None:
    result = m.build_input_required_result(None, "state")
    result["ttlMs"] = 5
    result["cacheScope"] = "public"
    out = m.decorate_result("resources/read", result, server_info=SERVER_INFO, ttl_ms=100)
    assert out["resultType"] == "input_required"
    assert "ttlMs" not in out and "cacheScope" not in out
    assert out["_meta"] == {m.SERVER_INFO_KEY: SERVER_INFO}
    assert_valid("InputRequiredResult", out)
    with pytest.raises(LocalProtocolError):
        m.decorate_result("tools/list", result, server_info=None)


def test_decorate_keeps_an_extension_result_type() -> None:
    out = m.decorate_result("tools/list", {"resultType": "task"}, server_info=None)
    assert out == {"resultType": "task"}


@pytest.mark.parametrize(
    ("result", "kwargs"),
    [
        ([], {}),
        ({"resultType": 1}, {}),
        ({"resultType": None}, {}),
        ({"tools": [], "_meta": "x"}, {}),
        ({"tools": []}, {"ttl_ms": -1}),
        ({"tools": []}, {"ttl_ms": 1.5}),
        ({"tools": []}, {"ttl_ms": True}),
        ({"tools": []}, {"cache_scope": "shared"}),
        ({"tools": [], "ttlMs": -5}, {}),
        ({"tools": [], "cacheScope": "everyone"}, {}),
    ],
)
def test_decorate_rejects_misuse(result: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(LocalProtocolError):
        m.decorate_result("tools/list", result, server_info=SERVER_INFO, **kwargs)


def test_discover_result() -> None:
    out = m.build_discover_result(
        supported_versions=(V, "2025-11-25"),
        capabilities={"tools": {"listChanged": True}},
        server_info=SERVER_INFO,
        instructions="Be nice.",
        ttl_ms=3_600_000,
        cache_scope="public",
    )
    assert out == {
        "resultType": "complete",
        "supportedVersions": [V, "2025-11-25"],
        "capabilities": {"tools": {"listChanged": True}},
        "instructions": "Be nice.",
        "_meta": {m.SERVER_INFO_KEY: SERVER_INFO},
        "ttlMs": 3_600_000,
        "cacheScope": "public",
    }
    assert_valid("DiscoverResult", out)
    minimal = m.build_discover_result(supported_versions=[V], capabilities={}, server_info=None)
    assert minimal == {
        "resultType": "complete",
        "supportedVersions": [V],
        "capabilities": {},
        "ttlMs": 0,
        "cacheScope": "private",
    }
    assert_valid("DiscoverResult", minimal)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"supported_versions": []},
        {"supported_versions": [1]},
        {"capabilities": None},
        {"instructions": 3},
        {"ttl_ms": -1},
    ],
)
def test_discover_rejects_misuse(kwargs: dict[str, Any]) -> None:
    args: dict[str, Any] = {"supported_versions": [V], "capabilities": {}, "server_info": None}
    args.update(kwargs)
    with pytest.raises(LocalProtocolError):
        m.build_discover_result(**args)


def test_discover_example_matches_what_we_build() -> None:
    ex = example("DiscoverResult", "server-capabilities-discovery.json")
    ours = m.build_discover_result(
        supported_versions=ex["supportedVersions"],
        capabilities=ex["capabilities"],
        server_info=ex.get("_meta", {}).get(m.SERVER_INFO_KEY),
        instructions=ex.get("instructions"),
        ttl_ms=ex["ttlMs"],
        cache_scope=ex["cacheScope"],
    )
    assert ours == ex


def test_listen_closed_result() -> None:
    out = m.build_listen_closed_result(1, server_info=SERVER_INFO)
    assert out == {
        "resultType": "complete",
        "_meta": {m.SUBSCRIPTION_ID_KEY: 1, m.SERVER_INFO_KEY: SERVER_INFO},
    }
    assert_valid("SubscriptionsListenResult", out)
    assert_valid("SubscriptionsListenResult", m.build_listen_closed_result("s", server_info=None))
    with pytest.raises(LocalProtocolError):
        m.build_listen_closed_result(True, server_info=None)


def test_classify_result() -> None:
    assert m.classify_result({"resultType": "complete"}) == "complete"
    assert m.classify_result({"content": []}) == "complete"  # earlier revisions omit it
    assert m.classify_result({"resultType": "input_required"}) == "input_required"
    assert (
        m.classify_result({"resultType": "input_required"}, method="prompts/get")
        == "input_required"
    )
    for bad, method in [
        ({"resultType": "task"}, None),
        ({"resultType": None}, None),
        ({"resultType": 1}, None),
        ([], None),
        (None, None),
        ({"resultType": "input_required"}, "tools/list"),
    ]:
        err = m.classify_result(bad, method=method)
        assert isinstance(err, ErrorData), bad
        assert err.code == ErrorCode.INTERNAL_ERROR


def test_may_require_input() -> None:
    assert {"tools/call", "resources/read", "prompts/get"} == m.MODERN_INPUT_REQUIRED_METHODS
    for method in m.MODERN_INPUT_REQUIRED_METHODS:
        assert m.may_require_input(method)
    for method in ("tools/list", "server/discover", "subscriptions/listen", "completion/complete"):
        assert not m.may_require_input(method)


# ---------------------------------------------------------------------------------------------
# 6. Logging
# ---------------------------------------------------------------------------------------------


def test_should_log() -> None:
    for i, request_level in enumerate(m.LOG_LEVELS):
        for j, message_level in enumerate(m.LOG_LEVELS):
            assert m.should_log(request_level, message_level) is (j >= i)
        assert not m.should_log(None, request_level)
    with pytest.raises(LocalProtocolError):
        m.should_log("info", "loud")
    with pytest.raises(LocalProtocolError):
        m.should_log("loud", "info")
    with pytest.raises(LocalProtocolError):
        m.should_log(None, "loud")


# ---------------------------------------------------------------------------------------------
# 7. MRTR: input-required results and the request-state codec
# ---------------------------------------------------------------------------------------------

ELICIT: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Your GitHub login?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}
SAMPLE: dict[str, Any] = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}],
        "maxTokens": 100,
    },
}
ROOTS: dict[str, Any] = {"method": "roots/list"}


def test_build_input_required_result() -> None:
    requests = {"login": ELICIT, "capital": SAMPLE, "roots": ROOTS}
    out = m.build_input_required_result(requests, "opaque")
    assert out == {
        "resultType": "input_required",
        "inputRequests": requests,
        "requestState": "opaque",
    }
    assert out["inputRequests"] is not requests
    assert_valid("InputRequiredResult", out)
    assert_valid("InputRequests", out["inputRequests"])
    only_state = m.build_input_required_result(None, "s")
    assert only_state == {"resultType": "input_required", "requestState": "s"}
    assert_valid("InputRequiredResult", only_state)
    only_requests = m.build_input_required_result({"r": ROOTS}, None)
    assert only_requests == {"resultType": "input_required", "inputRequests": {"r": ROOTS}}
    assert_valid("InputRequiredResult", only_requests)
    assert m.build_input_required_result({}, "s") == only_state


@pytest.mark.parametrize(
    ("requests", "state"),
    [
        (None, None),
        ({}, None),
        ({"x": {"method": "tools/call", "params": {}}}, None),
        ({"x": {"params": {}}}, None),
        ({"x": "elicitation/create"}, None),
        ({"x": {"method": "elicitation/create"}}, None),
        ({"x": {"method": "roots/list", "params": []}}, None),
        ({1: ROOTS}, None),
        (None, 5),
    ],
)
def test_build_input_required_result_rejects_misuse(requests: Any, state: Any) -> None:
    with pytest.raises(LocalProtocolError):
        m.build_input_required_result(requests, state)


def test_parse_input_responses_and_state() -> None:
    responses = {"login": {"action": "accept", "content": {"name": "octocat"}}}
    params = {"name": "t", "inputResponses": responses, "requestState": "s"}
    assert m.parse_input_responses(params) == responses
    assert_valid("InputResponses", m.parse_input_responses(params))
    assert m.parse_request_state(params) == "s"
    assert m.parse_input_responses({"name": "t"}) is None
    assert m.parse_input_responses(None) is None
    assert m.parse_request_state({}) is None
    assert m.parse_request_state(None) is None
    assert_invalid_params(m.parse_input_responses({"inputResponses": []}))
    assert_invalid_params(m.parse_input_responses({"inputResponses": {"a": "yes"}}))
    assert_invalid_params(m.parse_request_state({"requestState": 5}))


def test_parse_input_required_examples() -> None:
    folder = SCHEMA_DIR / "examples" / "InputRequiredResult"
    for path in sorted(folder.glob("*.json")):
        ex = _json.loads(path.read_bytes())
        assert m.classify_result(ex, method="tools/call") == "input_required"
        parsed = m.parse_input_required(ex)
        assert isinstance(parsed, m.InputRequiredResult), path
        assert parsed.request_state == ex.get("requestState")
        assert parsed.input_requests == ex.get("inputRequests", {})
        rebuilt = m.build_input_required_result(parsed.input_requests, parsed.request_state)
        assert rebuilt == ex


@pytest.mark.parametrize(
    "result",
    [
        None,
        {"resultType": "input_required"},
        {"resultType": "input_required", "requestState": 5},
        {"resultType": "input_required", "inputRequests": []},
        {"resultType": "input_required", "inputRequests": {"a": {"method": "ping"}}},
        {"resultType": "input_required", "inputRequests": {"a": "x"}},
        {"resultType": "input_required", "inputRequests": {"a": {**ROOTS, "params": 1}}},
    ],
)
def test_parse_input_required_malformed(result: Any) -> None:
    err = m.parse_input_required(result)
    assert isinstance(err, ErrorData) and err.code == ErrorCode.INTERNAL_ERROR


def test_build_retry_params() -> None:
    original = {
        "name": "t",
        "arguments": {"a": 1},
        "_meta": meta(),
        "inputResponses": {"old": {"action": "cancel"}},
        "requestState": "old",
    }
    responses = {"login": {"action": "accept", "content": {"name": "octocat"}}}
    out = m.build_retry_params(original, responses, "new")
    assert out == {
        "name": "t",
        "arguments": {"a": 1},
        "_meta": meta(),
        "inputResponses": responses,
        "requestState": "new",
    }
    assert original["requestState"] == "old"
    assert_valid("CallToolRequestParams", out)
    # No requestState in the input-required result: the retry carries none.
    bare = m.build_retry_params(original, {}, None)
    assert bare == {"name": "t", "arguments": {"a": 1}, "_meta": meta()}
    assert m.build_retry_params(None, None, "s") == {"requestState": "s"}
    with pytest.raises(LocalProtocolError):
        m.build_retry_params(original, responses, 5)  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        m.build_retry_params(original, [("a", 1)], None)  # type: ignore[arg-type]


def test_is_cacheable_request() -> None:
    assert m.is_cacheable_request("resources/read", {"uri": "file:///a", "_meta": meta()})
    assert m.is_cacheable_request("tools/list", None)
    assert not m.is_cacheable_request("tools/call", {"name": "t"})
    assert not m.is_cacheable_request("resources/read", {"uri": "u", "requestState": "s"})
    assert not m.is_cacheable_request("resources/read", {"uri": "u", "inputResponses": {}})


# --- RequestStateCodec ------------------------------------------------------------------------

PARAMS: dict[str, Any] = {"name": "deploy", "arguments": {"env": "prod", "n": [1, 2.5, None, True]}}


def codec(**kw: Any) -> m.RequestStateCodec:
    return m.RequestStateCodec(KEY, **kw)


def refused(call: Any) -> RemoteProtocolError:
    with pytest.raises(RemoteProtocolError) as info:
        call()
    assert info.value.error_code == ErrorCode.INVALID_PARAMS
    assert int(info.value.error_code) == -32602
    assert info.value.error_data().code == -32602
    return info.value


def test_codec_round_trip() -> None:
    c = codec()
    state = {"step": 2, "seen": ["a", "b"], "nested": {"x": None}}
    token = c.seal(method="tools/call", params=PARAMS, state=state, now=1000.0)
    assert token.isascii() and "=" not in token and token.count(".") == 1
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
    assert c.open(token, method="tools/call", params=PARAMS, now=1000.0) == state
    assert c.open(token, method="tools/call", params=PARAMS, now=1299.9) == state
    # The retry's params differ only in _meta / inputResponses / requestState: still accepted.
    retry = {
        **PARAMS,
        "_meta": meta(progressToken=9),
        "inputResponses": {"login": {"action": "accept"}},
        "requestState": token,
    }
    assert c.open(token, method="tools/call", params=retry, now=1001.0) == state
    # Key order does not matter: the digest is over canonical JSON.
    reordered = {"arguments": {"n": [1, 2.5, None, True], "env": "prod"}, "name": "deploy"}
    assert c.open(token, method="tools/call", params=reordered, now=1001.0) == state


def test_codec_null_state_and_none_params() -> None:
    c = codec()
    token = c.seal(method="prompts/get", params=None, state=None, now=0)
    assert c.open(token, method="prompts/get", params={}, now=1) is None
    assert c.open(token, method="prompts/get", params={"_meta": {}}, now=1) is None


def test_codec_binds_method_params_principal_and_expiry() -> None:
    c = codec(ttl=10.0)
    token = c.seal(method="tools/call", params=PARAMS, state=1, now=100.0, principal="alice")
    assert c.open(token, method="tools/call", params=PARAMS, now=105, principal="alice") == 1
    refused(lambda: c.open(token, method="prompts/get", params=PARAMS, now=105, principal="alice"))
    other = {**PARAMS, "name": "destroy"}
    refused(lambda: c.open(token, method="tools/call", params=other, now=105, principal="alice"))
    refused(lambda: c.open(token, method="tools/call", params=PARAMS, now=105, principal="bob"))
    refused(lambda: c.open(token, method="tools/call", params=PARAMS, now=105))
    err = refused(
        lambda: c.open(token, method="tools/call", params=PARAMS, now=110.0, principal="alice")
    )
    assert "expired" in err.message
    refused(lambda: c.open(token, method="tools/call", params=[], now=105, principal="alice"))  # type: ignore[arg-type]


def test_codec_key_rotation() -> None:
    old_key, new_key = b"o" * 16, b"n" * 16
    old = m.RequestStateCodec(old_key)
    token = old.seal(method="tools/call", params=PARAMS, state="s", now=0)
    rotated = m.RequestStateCodec(new_key, previous_keys=(old_key,))
    assert rotated.open(token, method="tools/call", params=PARAMS, now=1) == "s"
    refused(
        lambda: m.RequestStateCodec(new_key).open(token, method="tools/call", params=PARAMS, now=1)
    )
    assert "key" not in repr(rotated).replace("previous_keys", "")
    assert "nnnn" not in repr(rotated)


@pytest.mark.parametrize(
    "token",
    [
        None,
        5,
        "",
        ".",
        "abc",
        "a.b.c",
        "é.é",
        "x" * (64 * 1024 + 1),
    ],
)
def test_codec_refuses_garbage(token: Any) -> None:
    refused(lambda: codec().open(token, method="tools/call", params=PARAMS, now=0))


def _forge(payload: Any, key: bytes = KEY) -> str:
    """A token signed with the right key but carrying an arbitrary payload."""
    raw = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    body = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    mac = hmac.new(key, b"mcp-sansio requestState v1\x00" + body.encode(), hashlib.sha256)
    return f"{body}.{base64.urlsafe_b64encode(mac.digest()).rstrip(b'=').decode()}"


def test_codec_wire_format_is_as_documented() -> None:
    c = codec()
    token = c.seal(method="tools/call", params=PARAMS, state={"a": 1}, now=5.0)
    body = token.split(".")[0]
    payload = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert payload["v"] == 1 and payload["x"] == 305.0 and payload["s"] == {"a": 1}
    canonical = orjson.dumps(["tools/call", None, PARAMS], option=orjson.OPT_SORT_KEYS)
    digest = base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()
    assert payload["d"] == digest
    assert _forge(payload) == token


@pytest.mark.parametrize(
    "payload",
    [
        b"not json",
        b"\xff\xfe",
        [],
        {"v": 2, "d": "x", "x": 1e9, "s": 1},
        {"v": True, "d": "x", "x": 1e9, "s": 1},
        {"v": 1, "d": 5, "x": 1e9, "s": 1},
        {"v": 1, "d": "x", "x": "later", "s": 1},
        {"v": 1, "d": "x", "x": True, "s": 1},
        {"v": 1, "d": "x", "x": 1e9},
        {"v": 1, "d": "wrong-digest", "x": 1e9, "s": 1},
    ],
)
def test_codec_refuses_well_signed_nonsense(payload: Any) -> None:
    refused(lambda: codec().open(_forge(payload), method="tools/call", params=PARAMS, now=0))


def test_codec_refuses_undigestable_params_on_open() -> None:
    c = codec()
    token = c.seal(method="tools/call", params=PARAMS, state=1, now=0)
    deep: Any = 0
    for _ in range(300):
        deep = [deep]
    refused(lambda: c.open(token, method="tools/call", params={"a": deep}, now=1))
    refused(lambda: c.open(token, method="tools/call", params={"a": {1: 2}}, now=1))


def _nested(levels: int) -> dict[str, Any]:
    """Params nested ``levels`` deep, the params object counted."""
    value: Any = 0
    for _ in range(levels - 1):
        value = [value]
    return {"a": value}


def test_codec_digests_params_nested_to_the_depth_bound_and_no_deeper() -> None:
    # The bound (200) stops short of orjson's own (254) and of Python's recursion
    # limit: at it a request is sealed and opened as any other; one level past it is
    # a misuse to seal, and refused on open even with the digest those params would
    # have (which no seal makes).
    c = codec()
    at = _nested(200)
    token = c.seal(method="tools/call", params=at, state=1, now=0)
    assert c.open(token, method="tools/call", params=at, now=1) == 1
    past = _nested(201)
    with pytest.raises(LocalProtocolError, match="nested too deeply"):
        c.seal(method="tools/call", params=past, state=1, now=0)
    canonical = orjson.dumps(["tools/call", None, past], option=orjson.OPT_SORT_KEYS)
    digest = base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()
    forged = _forge({"v": 1, "d": digest, "x": 1e9, "s": 1})
    err = refused(lambda: c.open(forged, method="tools/call", params=past, now=1))
    assert err.message == "Invalid requestState: issued for a different request"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"state": object()},
        {"state": 2**70},
        {"params": {"a": {1: "non-string key"}}},
        {"params": {"a": object()}},
        {"now": float("nan")},
        {"now": float("inf")},
        {"now": "now"},
        {"state": "x" * 70_000},
    ],
)
def test_codec_seal_misuse(kwargs: dict[str, Any]) -> None:
    args: dict[str, Any] = {"method": "tools/call", "params": PARAMS, "state": 1, "now": 0.0}
    args.update(kwargs)
    with pytest.raises(LocalProtocolError):
        codec().seal(**args)


def test_codec_open_misuse() -> None:
    c = codec()
    token = c.seal(method="tools/call", params=PARAMS, state=1, now=0)
    with pytest.raises(LocalProtocolError):
        c.open(token, method="tools/call", params=PARAMS, now=float("nan"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"key": b"short"},
        {"key": "a string key of 32 characters!!!"},
        {"previous_keys": (b"tiny",)},
        {"ttl": 0},
        {"ttl": -1.0},
        {"ttl": float("inf")},
        {"ttl": "300"},
        {"max_size": 0},
        {"max_size": 1.5},
    ],
)
def test_codec_construction_misuse(kwargs: dict[str, Any]) -> None:
    key = kwargs.pop("key", KEY)
    with pytest.raises(LocalProtocolError):
        m.RequestStateCodec(key, **kwargs)


# --- Property tests ---------------------------------------------------------------------------

_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=8)
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=12,
)
_params = st.dictionaries(
    _text.filter(lambda k: k not in {"_meta", "inputResponses", "requestState"}),
    _json_values,
    max_size=4,
)
_PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _canonical_bytes(params: dict[str, Any]) -> bytes:
    return orjson.dumps(params, option=orjson.OPT_SORT_KEYS)


def _mutate(token: str, data: st.DataObject) -> str:
    kind = data.draw(st.sampled_from(["flip", "replace", "truncate", "extend", "insert", "delete"]))
    if kind == "flip":
        raw = bytearray(token.encode("ascii"))
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= 1 << data.draw(st.integers(0, 7))
        return raw.decode("latin-1")
    if kind == "replace":
        i = data.draw(st.integers(0, len(token) - 1))
        c = data.draw(st.characters().filter(lambda ch: ch != token[i]))
        return token[:i] + c + token[i + 1 :]
    if kind == "truncate":
        return token[: data.draw(st.integers(0, len(token) - 1))]
    if kind == "extend":
        return token + data.draw(st.text(min_size=1, max_size=8))
    if kind == "insert":
        i = data.draw(st.integers(0, len(token)))
        return token[:i] + data.draw(st.text(min_size=1, max_size=4)) + token[i:]
    i = data.draw(st.integers(0, len(token) - 1))
    return token[:i] + token[i + 1 :]


@_PROPERTY
@given(params=_params, state=_json_values, now=st.floats(0, 1e9), data=st.data())
def test_property_any_tampering_is_refused(
    params: dict[str, Any], state: Any, now: float, data: st.DataObject
) -> None:
    c = codec()
    token = c.seal(method="tools/call", params=params, state=state, now=now)
    assert c.open(token, method="tools/call", params=params, now=now) == state
    tampered = _mutate(token, data)
    assert tampered != token
    refused(lambda: c.open(tampered, method="tools/call", params=params, now=now))


@_PROPERTY
@given(params=_params, other=_params, state=_json_values)
def test_property_state_is_bound_to_its_request(
    params: dict[str, Any], other: dict[str, Any], state: Any
) -> None:
    assume(_canonical_bytes(params) != _canonical_bytes(other))
    c = codec()
    token = c.seal(method="resources/read", params=params, state=state, now=0)
    refused(lambda: c.open(token, method="resources/read", params=other, now=1))
    # A token for another request cannot be transplanted either.
    theirs = c.seal(method="resources/read", params=other, state="x", now=0)
    refused(lambda: c.open(theirs, method="resources/read", params=params, now=1))


@_PROPERTY
@given(params=_params, state=_json_values, key=st.binary(min_size=16, max_size=64))
def test_property_other_key_is_refused(params: dict[str, Any], state: Any, key: bytes) -> None:
    assume(key != KEY)
    token = m.RequestStateCodec(key).seal(method="tools/call", params=params, state=state, now=0)
    refused(lambda: codec().open(token, method="tools/call", params=params, now=1))


@_PROPERTY
@given(
    now=st.floats(0, 1e9),
    ttl=st.floats(1.0, 1e6),
    late=st.floats(0, 1e9),
    early=st.floats(0, 0.99),
)
def test_property_expiry_is_enforced(now: float, ttl: float, late: float, early: float) -> None:
    c = codec(ttl=ttl)
    token = c.seal(method="tools/call", params=PARAMS, state="s", now=now)
    assert c.open(token, method="tools/call", params=PARAMS, now=now + early * ttl) == "s"
    refused(lambda: c.open(token, method="tools/call", params=PARAMS, now=now + ttl + late))


# ---------------------------------------------------------------------------------------------
# 8. Subscriptions
# ---------------------------------------------------------------------------------------------


def test_filter_fields_match_the_schema() -> None:
    assert set(_defs()["SubscriptionFilter"]["properties"]) == {
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
        "resourceSubscriptions",
    }


def test_parse_listen_filter_spec_example() -> None:
    folder = SCHEMA_DIR / "examples" / "SubscriptionsListenRequest"
    for path in sorted(folder.glob("*.json")):
        request = _json.loads(path.read_bytes())
        flt = m.parse_listen_filter(request["params"])
        assert isinstance(flt, m.SubscriptionFilter)
        assert flt.to_wire() == {k: v for k, v in request["params"]["notifications"].items() if v}


def test_parse_listen_filter() -> None:
    flt = m.parse_listen_filter(
        {
            "_meta": meta(),
            "notifications": {
                "toolsListChanged": True,
                "promptsListChanged": False,
                "resourceSubscriptions": ["file:///a", "file:///b", "file:///a"],
                "com.example/unknown": 1,
            },
        }
    )
    assert flt == m.SubscriptionFilter(
        tools_list_changed=True, resource_subscriptions=("file:///a", "file:///b")
    )
    assert isinstance(flt, m.SubscriptionFilter)
    assert flt.to_wire() == {
        "toolsListChanged": True,
        "resourceSubscriptions": ["file:///a", "file:///b"],
    }
    empty = m.parse_listen_filter({"notifications": {}})
    assert empty == m.SubscriptionFilter()
    assert isinstance(empty, m.SubscriptionFilter) and empty.to_wire() == {}


@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        {"notifications": None},
        {"notifications": []},
        {"notifications": {"toolsListChanged": "yes"}},
        {"notifications": {"resourcesListChanged": None}},
        {"notifications": {"resourceSubscriptions": "file:///a"}},
        {"notifications": {"resourceSubscriptions": [1]}},
        {"notifications": {"resourceSubscriptions": ["u"] * 3}},
    ],
)
def test_parse_listen_filter_invalid(params: Any) -> None:
    assert_invalid_params(m.parse_listen_filter(params, max_resource_subscriptions=2))


def test_filter_matches() -> None:
    flt = m.SubscriptionFilter(
        tools_list_changed=True,
        resources_list_changed=True,
        resource_subscriptions=["file:///a"],
    )
    assert flt.matches("notifications/tools/list_changed")
    assert flt.matches("notifications/resources/list_changed", {})
    assert not flt.matches("notifications/prompts/list_changed")
    assert flt.matches("notifications/resources/updated", {"uri": "file:///a"})
    assert not flt.matches("notifications/resources/updated", {"uri": "file:///b"})
    assert not flt.matches("notifications/resources/updated", {"uri": 1})
    assert not flt.matches("notifications/resources/updated", None)
    for method in m.REQUEST_SCOPED_NOTIFICATIONS | {"notifications/tasks", "notifications/x"}:
        assert not flt.matches(method, {})
    assert m.SubscriptionFilter(prompts_list_changed=True).matches(
        "notifications/prompts/list_changed"
    )
    assert not m.SubscriptionFilter().matches("notifications/tools/list_changed")


def test_filter_honored_by() -> None:
    everything = m.SubscriptionFilter(
        tools_list_changed=True,
        prompts_list_changed=True,
        resources_list_changed=True,
        resource_subscriptions=["file:///a"],
    )
    assert everything.honored_by({}) == m.SubscriptionFilter()
    caps = {
        "tools": {"listChanged": True},
        "prompts": {},
        "resources": {"listChanged": False, "subscribe": True},
    }
    assert everything.honored_by(caps) == m.SubscriptionFilter(
        tools_list_changed=True, resource_subscriptions=["file:///a"]
    )
    full = {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True},
    }
    assert everything.honored_by(full) == everything
    assert everything.to_wire() == {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
        "resourceSubscriptions": ["file:///a"],
    }
    assert_valid("SubscriptionFilter", everything.to_wire())
    assert m.SubscriptionFilter().honored_by(full) == m.SubscriptionFilter()


def test_acknowledged_notification() -> None:
    ex = example("SubscriptionsAcknowledgedNotification", "listen-acknowledged.json")
    flt = m.parse_listen_filter(ex["params"])
    assert isinstance(flt, m.SubscriptionFilter)
    ours = m.build_acknowledged_notification("listen-1", flt)
    assert ours == ex
    assert_valid("SubscriptionsAcknowledgedNotification", ours)
    params = m.build_acknowledged_params(7, m.SubscriptionFilter())
    assert params == {"notifications": {}, "_meta": {m.SUBSCRIPTION_ID_KEY: 7}}
    assert_valid("SubscriptionsAcknowledgedNotificationParams", params)
    with pytest.raises(LocalProtocolError):
        m.build_acknowledged_notification(None, flt)  # type: ignore[arg-type]


def test_tag_subscription_notification() -> None:
    params = {"uri": "file:///a", "_meta": {"traceparent": "tp"}}
    out = m.tag_subscription_notification(params, 1)
    assert out == {"uri": "file:///a", "_meta": {"traceparent": "tp", m.SUBSCRIPTION_ID_KEY: 1}}
    assert params["_meta"] == {"traceparent": "tp"}
    assert_valid(
        "ResourceUpdatedNotification",
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": out},
    )
    bare = m.tag_subscription_notification(None, "sub")
    assert bare == {"_meta": {m.SUBSCRIPTION_ID_KEY: "sub"}}
    assert_valid(
        "ToolListChangedNotification",
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": bare},
    )
    for bad in (True, None, 1.5):
        with pytest.raises(LocalProtocolError):
            m.tag_subscription_notification(None, bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Client-side version selection
# ---------------------------------------------------------------------------------------------


def test_parse_unsupported_version_and_select() -> None:
    err = validate(
        {"_meta": meta(**{m.PROTOCOL_VERSION_KEY: "1900-01-01"})},
        supported_versions=[V, "2025-11-25"],
    )
    assert isinstance(err, ErrorData)
    offered = m.parse_unsupported_version(err.to_wire())
    assert offered == (V, "2025-11-25")
    assert m.select_version(offered, ["2099-01-01", "2025-11-25", V]) == "2025-11-25"
    assert m.select_version(offered, ["2099-01-01"]) is None
    for bad in (
        None,
        {"code": -32602, "message": "x"},
        {"code": -32022, "message": "x"},
        {"code": -32022, "message": "x", "data": {"supported": "2026-07-28"}},
        {"code": -32022, "message": "x", "data": {"supported": [1]}},
    ):
        assert m.parse_unsupported_version(bad) is None


def test_modern_error_codes() -> None:
    assert {-32020, -32021, -32022} == m.MODERN_ERROR_CODES

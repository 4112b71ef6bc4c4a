"""Rules whose tests were missing (a reviewer's surviving mutants): the extension-id
grammar's edges and the values of ``capabilities.extensions``; which challenge's
parameters and error a ``WWW-Authenticate`` header is read for; ``clientInfo``'s
``version`` a string."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sansio import ConnectionConfig
from mcp_sansio._oauth import parse_bearer_challenge
from mcp_trio._client_common import implementation

# ------------------------------------------------------------------ extension ids


@pytest.mark.parametrize(
    "key",
    [
        "com.example-/x",  # the last label ends in "-"
        "com-.example/x",  # an earlier label ends in "-"
        "com.-example/x",  # a label starts with "-"
        "com.example/x.",  # the name ends in "."
        "com.example/-x",  # the name starts with "-"
        "com..example/x",  # an empty label
    ],
)
def test_extension_id_edges_refused(key: str) -> None:
    with pytest.raises(ValueError, match="extension id"):
        ConnectionConfig(capabilities={"extensions": {key: {}}})


@pytest.mark.parametrize(
    "key", ["io.modelcontextprotocol/ui", "com.example/", "a/b", "com.ex-ample.a1/x_y.z-9"]
)
def test_extension_id_accepted(key: str) -> None:
    ConnectionConfig(capabilities={"extensions": {key: {}}})


def test_an_extension_id_is_a_string() -> None:
    # (str(5) is no id either, but a key that is no string is refused as such.)
    class Id:
        def __str__(self) -> str:
            return "com.example/x"

    with pytest.raises(ValueError, match="extension id"):
        ConnectionConfig(capabilities={"extensions": {Id(): {}}})


# ------------------------------------------------------------------ extension values


@pytest.mark.parametrize(
    ("capabilities", "named"),
    [
        ({"extensions": None}, "capabilities.extensions must be an object"),
        ({"extensions": []}, "capabilities.extensions must be an object"),
        ({"extensions": {"com.example/x": 5}}, r"\['com.example/x'\] must be an object"),
        ({"extensions": {"com.example/x": None}}, r"\['com.example/x'\] must be an object"),
        ({"extensions": {"com.example/x": True}}, r"\['com.example/x'\] must be an object"),
        ({"extensions": {"com.example/x": ["a"]}}, r"\['com.example/x'\] must be an object"),
    ],
)
def test_extension_values_are_objects(capabilities: dict[str, Any], named: str) -> None:
    # The schema: extensions?: {[key: string]: JSONObject} (optional, not nullable).
    with pytest.raises(ValueError, match=named):
        ConnectionConfig(capabilities=capabilities)


def test_extension_values_that_are_objects_pass() -> None:
    caps = {"extensions": {"com.example/x": {}, "com.example/y": {"on": True}}}
    assert ConnectionConfig(capabilities=caps).capabilities == caps
    assert ConnectionConfig(capabilities={"extensions": {}}).capabilities == {"extensions": {}}
    assert ConnectionConfig(capabilities={}).capabilities == {}


# ------------------------------------------------------------------ challenges


def test_first_challenge_with_a_parameter_wins() -> None:
    got = parse_bearer_challenge(
        [
            'DPoP algs="ES256", Bearer resource_metadata="https://a/1", scope="s1"',
            'Bearer resource_metadata="https://b/2", scope="s2"',
        ]
    )
    assert got is not None and got.resource_metadata == "https://a/1" and got.scope == "s1"


def test_only_dpops_use_dpop_nonce_wins_over_an_earlier_error() -> None:
    # RFC 9449 section 7.2: the nonce error is the DPoP scheme's; a Bearer challenge
    # naming it is no reason to pass over the first error.
    got = parse_bearer_challenge(['DPoP error="invalid_token"', 'Bearer error="use_dpop_nonce"'])
    assert got is not None and got.error == "invalid_token"
    got = parse_bearer_challenge(['Bearer error="invalid_token"', 'DPoP error="use_dpop_nonce"'])
    assert got is not None and got.error == "use_dpop_nonce"


# ------------------------------------------------------------------ clientInfo


@pytest.mark.parametrize("version", [1, 1.0, None, ["1"]])
def test_client_info_version_is_a_string(version: Any) -> None:
    with pytest.raises(ValueError, match="'version'"):
        implementation({"name": "app", "version": version})
    assert implementation({"name": "app", "version": "1"}) == {"name": "app", "version": "1"}

"""The ``_meta`` a server author gives a tool, resource, template or prompt has keys of
the spec's form (basic/index.mdx#_meta: an optional prefix of dot-separated labels, each
starting with a letter and ending with a letter or digit, then ``/``; a name that begins
and ends with an alphanumeric), outside MCP's reserved namespace (a prefix whose second
label is ``modelcontextprotocol`` or ``mcp``): anything else is refused at registration,
naming the key and the rule."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_trio._server import Server


def register(kind: str, meta: Any) -> None:
    server = Server("m")

    async def fn() -> str:
        return "x"

    if kind == "tool":
        server.tool(meta=meta)(fn)
    elif kind == "prompt":
        server.prompt(meta=meta)(fn)
    elif kind == "resource":
        server.resource("mem://r", meta=meta)(fn)
    else:

        async def tfn(id: str) -> str:
            return id

        server.resource("mem://r/{id}", meta=meta)(tfn)


KINDS = ["tool", "prompt", "resource", "template"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "key",
    [
        "k",
        "",
        "a.b_c-d",
        "com.example/",
        "com.example/k",
        "ui/resourceUri",
        "com.example.mcp/x",  # (the second label is "example": not reserved)
        "mcp/x",  # (one label: there is no second)
        "a1.b-2.c/x9",
        "progressToken",
        "traceparent",
    ],
)
def test_well_formed_meta_keys_are_accepted(kind: str, key: str) -> None:
    register(kind, {key: 1})


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("bad key!", "has a malformed name"),
        ("-x", "has a malformed name"),
        ("x-", "has a malformed name"),
        ("com.example/_x", "has a malformed name"),
        ("a/b/c", "has a malformed prefix"),
        ("1abc.com/x", "has a malformed prefix"),
        ("/x", "has a malformed prefix"),
        ("a..b/x", "has a malformed prefix"),
        ("a-/x", "has a malformed prefix"),
        ("exa mple/x", "has a malformed prefix"),
        ("é.com/x", "has a malformed prefix"),
        ("io.modelcontextprotocol/x", "has a prefix reserved for MCP"),
        ("dev.mcp/x", "has a prefix reserved for MCP"),
        ("org.modelcontextprotocol.api/x", "has a prefix reserved for MCP"),
        ("com.MCP/x", "has a prefix reserved for MCP"),
    ],
)
def test_malformed_or_reserved_meta_keys_are_refused(kind: str, key: str, why: str) -> None:
    with pytest.raises(ValueError) as info:
        register(kind, {"com.example/ok": 1, key: 1})
    assert f"_meta key {key!r} {why}" in str(info.value)
    assert str(info.value).endswith("(basic/index.mdx#_meta)")


@pytest.mark.parametrize("kind", KINDS)
def test_meta_that_is_not_a_mapping_of_strings_is_refused(kind: str) -> None:
    with pytest.raises(TypeError, match="meta must be a mapping, not list"):
        register(kind, [("k", 1)])
    with pytest.raises(ValueError, match="_meta key 1 must be a string, not int"):
        register(kind, {1: 1})

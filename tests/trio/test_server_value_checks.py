"""Values a server describes are checked when they are built or registered, not sent as
they are: MIME types (``server/prompts.mdx``: image and audio data "MUST ... include a
valid MIME type") and resource URIs (``server/resources.mdx``: "Custom URI schemes MUST
be in accordance with RFC3986"; the schema's ``Resource.uri`` is ``format: uri``).
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from mcp_sansio import types as mcp_types
from mcp_trio import open_client
from mcp_trio._server import Server
from mcp_trio._server_content import Audio, EmbeddedResource, Image, ResourceLink
from mcp_trio._uritemplate import uri_problem

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8

VALID_MIME_TYPES = [
    "image/png",
    "audio/wav",
    "application/vnd.api+json",
    "text/html;profile=mcp-app",
    "text/plain; charset=utf-8",
    'text/plain; name="a \\"quoted\\" value"',
    "application/x-sh",
]
INVALID_MIME_TYPES = [
    "not a mime type",
    "image",
    "image/",
    "/png",
    "image/png/x",
    "image/png;",
    "image/png; charset",
    "image/png ",
    " image/png",
    "imagé/png",
    "-image/png",
    "",
    "*/*",  # (a range, for Accept: not a type)
    "image/*",
    "text/plain charset=utf-8",  # (a parameter follows a ';')
    "text/plain; a=b c=d",
]


def _builders(mime_type: Any) -> list[Any]:
    return [
        lambda: Image(PNG, mime_type),
        lambda: Audio(b"RIFF", mime_type),
        lambda: EmbeddedResource("res://x", "text", mime_type),
        lambda: ResourceLink("res://x", "x", mime_type=mime_type),
    ]


@pytest.mark.parametrize("mime_type", VALID_MIME_TYPES)
def test_valid_mime_types_are_taken(mime_type: str) -> None:
    image, audio, embedded, link = (build().to_json() for build in _builders(mime_type))
    assert image["mimeType"] == audio["mimeType"] == link["mimeType"] == mime_type
    assert embedded["resource"]["mimeType"] == mime_type


@pytest.mark.parametrize("mime_type", INVALID_MIME_TYPES)
@pytest.mark.parametrize("which", range(4))
def test_invalid_mime_types_are_refused_at_construction(mime_type: str, which: int) -> None:
    with pytest.raises(ValueError, match="is not a valid MIME type") as info:
        _builders(mime_type)[which]()
    assert repr(mime_type) in str(info.value)


def test_a_mime_type_must_be_a_string() -> None:
    with pytest.raises(TypeError, match=r"Image\.mime_type must be a string"):
        Image(PNG, b"image/png")  # type: ignore[arg-type]


def test_optional_mime_types_may_be_left_out() -> None:
    assert EmbeddedResource("res://x", b"\x00").to_json()["resource"]["mimeType"] == (
        "application/octet-stream"
    )
    assert "mimeType" not in ResourceLink("res://x", "x").to_json()


@pytest.mark.parametrize("uri", ["res://fixed", "res://{id}"])
def test_a_resource_mime_type_is_checked_at_registration(uri: str) -> None:
    server = Server("mime")
    with pytest.raises(ValueError, match="'text plain' is not a valid MIME type"):
        server.add_resource(lambda id="": "", uri, mime_type="text plain")
    assert not server._registry.resources
    assert not server._registry.templates
    server.add_resource(lambda id="": "", uri, mime_type="text/plain; charset=utf-8")


# ------------------------------------------------------------------ resource URIs

VALID_URIS = [
    "file:///a/b.txt",
    "res://x",
    "urn:isbn:0451450523",
    "mailto:someone@example.com",
    "a:",
    "a:/x/y",
    "a:b",
    "skill://acme/pdf-processing/SKILL.md",
    "https://u:p@example.com:8080/a%20b/c;v=1?q=1&r=/?#frag/?",
    "http://[::1]:80/x",
    "http://[v1.fe:x]/",
    "git+ssh://host/x",
    "x://h:/empty-port",
    "x://",
    "a:#x?y",
    "https://example.com/caf%C3%A9?q=%5B1%5D",
]
INVALID_URIS = [
    ("a://b c", "' ' at 5 must be percent-encoded"),
    ("relative/path", "no scheme"),
    ("//host/x", "no scheme"),
    ("1a://x", "no scheme"),
    (":x", "no scheme"),
    ("a://h/é", "'é' at 6 must be percent-encoded"),
    ("a://h/%zz", "'%' at 6 does not start a percent-escape"),
    ("a://h/%4", "'%' at 6 does not start a percent-escape"),
    ("a://h/x\\y", "must be percent-encoded"),
    ('a://h/"x"', "must be percent-encoded"),
    ("a://h/<x>", "must be percent-encoded"),
    ("a://h/x\ny", "must be percent-encoded"),
    ("a://h:8o/x", "malformed"),
    ("a:x#y#z", "malformed"),
    ("a://h/[x]", "malformed"),
    ("a://[zz]/", "not an IPv6 address"),
    ("a://[::1%25eth0]/", "not an IPv6 address"),
    ("https://例え.jp/", "'例' at 8 must be percent-encoded"),  # (an IRI)
    ("https://a/b?q=[1]", "malformed"),  # (percent-encode '[' and ']': %5B1%5D)
]


@pytest.mark.parametrize("uri", VALID_URIS)
def test_rfc_3986_uris_are_taken(uri: str) -> None:
    assert uri_problem(uri) is None
    server = Server("uris")
    server.add_resource(lambda: "", uri)
    assert uri in server._registry.resources
    assert EmbeddedResource(uri, "t").to_json()["resource"]["uri"] == uri
    assert ResourceLink(uri, "n").to_json()["uri"] == uri


@pytest.mark.parametrize(("uri", "problem"), INVALID_URIS)
def test_other_uris_are_refused_naming_the_uri(uri: str, problem: str) -> None:
    found = uri_problem(uri)
    assert found is not None
    assert problem in found
    server = Server("uris")
    with pytest.raises(ValueError, match="is not an RFC 3986 URI") as info:
        server.add_resource(lambda: "", uri)
    assert repr(uri) in str(info.value)
    assert problem in str(info.value)
    assert "percent-encode" in str(info.value)  # (what to do about it)
    assert not server._registry.resources
    for build in (lambda: EmbeddedResource(uri, "t"), lambda: ResourceLink(uri, "n")):
        with pytest.raises(ValueError, match="is not an RFC 3986 URI") as info:
            build()
        assert "'%5B' and '%5D'" in str(info.value)


def test_a_resource_uri_must_be_a_string() -> None:
    with pytest.raises(TypeError, match=r"ResourceLink\.uri must be a string"):
        ResourceLink(b"res://x", "n")  # type: ignore[arg-type]


def _any_variables(**values: str) -> str:
    return ""


@pytest.mark.parametrize(
    "template",
    [
        "repo://{owner}/{name}",
        "file:///{+path}{?rev}",
        "x://h:{port}/a",  # a port is digits: the placeholder 0 fits
        "{scheme}://h/a",  # a scheme starts with a letter: the placeholder x fits
        "x://h/{a}{.ext}{/seg}{;p}{&q}{#frag}",
        "notes://{id}",
        "{+uri}",  # the value may bring its scheme: ':' passes through {+...}
        "{+base}/x",
        "{+base}{?q}",
        "x://[{addr}]/",  # the address stands for ::1 (no placeholder is one)
        "x://u@[{addr}]:{port}/a",
        "x://[{prefix}::1]/",  # (part of the address: the placeholder 0 fits)
        "{+scheme}://[{addr}]/",  # (x brings the scheme itself)
    ],
)
def test_templates_that_make_uris_are_taken(template: str) -> None:
    server = Server("templates")
    server.add_resource(_any_variables, template)
    assert template in server._registry.templates


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("a://b c/{x}", "' ' at 5 must be percent-encoded"),
        ("x://h/é/{x}", "'é' at 6 must be percent-encoded"),
        ("x://h/{x}#a#b", "malformed"),
        ("x://h/{x}{#frag}#b", "malformed"),  # the {#frag} brings a second '#'
        ("{x}/path", "no scheme"),  # neither placeholder makes 0/path nor x/path a URI
        ("{#x}/path", "no scheme"),  # (and '#' comes first: no scheme can follow)
        ("{+base}/a b", "must be percent-encoded"),  # (the scheme is only not required)
        ("x://[{ip}x]/", "not an IPv6 address"),  # (an expression, not all of it)
    ],
)
def test_templates_that_make_other_uris_are_refused(template: str, problem: str) -> None:
    server = Server("templates")
    with pytest.raises(ValueError, match="does not make RFC 3986 URIs") as info:
        server.add_resource(_any_variables, template)
    assert repr(template) in str(info.value)
    assert problem in str(info.value)
    assert "percent-encode" in str(info.value)
    assert not server._registry.templates


def test_checking_a_long_uri_is_linear() -> None:
    """The check runs on registration only, but a pathological URI must not make it
    backtrack: each of these is two hundred thousand characters (no timing asserted;
    a quadratic regex would take hours)."""
    for uri in (
        "a://" + "a:" * 100_000 + "x ",
        "a://" + "%41" * 70_000 + "@@",
        "a:" + "/" * 200_000 + " ",
        "a://h" + "/a" * 100_000 + "#?#",
    ):
        assert uri_problem(uri) is not None


# ------------------------------------------------------------------ icons and annotations
# (schema 2025-11-25 and 2026-07-28: ``Icon``, ``ToolAnnotations``, ``Annotations``). One
# bad value would break every list holding it, and a strict client refuses the list.

ICON = "https://example.com/i.png"

BAD_ICONS: list[tuple[Any, type[Exception], str]] = [
    ([{"src": ICON, "sizes": "48x48"}], TypeError, r"icons\[0\]\.sizes must be a list"),
    ([mcp_types.Icon(src=ICON, sizes="48x48")], TypeError, r"icons\[0\]\.sizes .*'48x48'"),  # type: ignore[arg-type]
    ([{"src": ICON, "sizes": [48]}], TypeError, r"icons\[0\]\.sizes must be a list"),
    ([{"src": ICON}, {"src": ICON, "theme": "blue"}], ValueError, r"icons\[1\]\.theme .*'blue'"),
    ([{"src": ICON, "mimeType": "png"}], ValueError, r"icons\[0\]\.mimeType 'png' is not a valid"),
    ([{"src": "logo.png"}], ValueError, r"icons\[0\]\.src 'logo.png' is not an RFC 3986 URI"),
    ([{"sizes": ["any"]}], TypeError, r"icons\[0\]\.src must be a string"),
    ([ICON], TypeError, r"icons\[0\] must be an Icon or a mapping, not str"),
    ({"src": ICON}, TypeError, "icons must be a list"),
]
BAD_TOOL_ANNOTATIONS: list[tuple[Any, type[Exception], str]] = [
    ({"readOnlyHint": "yes"}, TypeError, r"annotations\.readOnlyHint must be True or False"),
    (
        mcp_types.ToolAnnotations(destructive_hint=0),  # type: ignore[arg-type]
        TypeError,
        r"annotations\.destructiveHint .* not 0",
    ),
    ({"openWorldHint": None}, TypeError, r"annotations\.openWorldHint"),
    ({"idempotentHint": 1}, TypeError, r"annotations\.idempotentHint"),
    ({"title": 3}, TypeError, r"annotations\.title must be a string"),
    (["readOnlyHint"], TypeError, "annotations must be a mapping or an .*ToolAnnotations"),
]
BAD_ANNOTATIONS: list[tuple[Any, type[Exception], str]] = [
    ({"priority": 5}, ValueError, r"annotations\.priority must be from 0 .* not 5"),
    (mcp_types.Annotations(priority=-0.5), ValueError, r"annotations\.priority .* not -0\.5"),
    ({"priority": math.nan}, ValueError, r"annotations\.priority .* not nan"),
    ({"priority": True}, TypeError, r"annotations\.priority must be a number"),
    ({"priority": "high"}, TypeError, r"annotations\.priority must be a number"),
    ({"audience": ["robot"]}, ValueError, r"annotations\.audience holds 'robot'"),
    (mcp_types.Annotations(audience="user"), TypeError, r"annotations\.audience .* not 'user'"),  # type: ignore[arg-type]
    ({"audience": "user"}, TypeError, r"annotations\.audience must be a list of roles"),
    ({"lastModified": 1736694058}, TypeError, r"annotations\.lastModified must be an ISO 8601"),
    ("user", TypeError, "annotations must be a mapping or an .*Annotations, not str"),
]


@pytest.mark.parametrize(("icons", "error", "message"), BAD_ICONS)
def test_bad_icons_are_refused_naming_the_owner_and_the_member(
    icons: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=f"^server 'srv': {message}"):
        Server("srv", icons=icons)
    server = Server("srv")
    registrations: list[tuple[str, Any]] = [
        ("tool 't'", lambda: server.add_tool(lambda: 1, name="t", icons=icons)),
        ("prompt 'p'", lambda: server.add_prompt(lambda: "", name="p", icons=icons)),
        ("resource 'res://a'", lambda: server.add_resource(lambda: "", "res://a", icons=icons)),
        (
            "resource template 'res://{id}'",
            lambda: server.add_resource(lambda id: "", "res://{id}", icons=icons),
        ),
    ]
    for owner, register in registrations:
        with pytest.raises(error, match=f"^{re.escape(owner)}: {message}"):
            register()
    registry = server._registry
    assert not (registry.tools or registry.prompts or registry.resources or registry.templates)


@pytest.mark.parametrize(("annotations", "error", "message"), BAD_TOOL_ANNOTATIONS)
def test_bad_tool_annotations_are_refused_at_registration(
    annotations: Any, error: type[Exception], message: str
) -> None:
    server = Server("srv")
    with pytest.raises(error, match=f"^tool 'typo': {message}"):

        @server.tool(annotations=annotations)
        def typo() -> int:
            return 1

    assert not server._registry.tools


@pytest.mark.parametrize(("annotations", "error", "message"), BAD_ANNOTATIONS)
def test_bad_annotations_are_refused_at_registration_and_construction(
    annotations: Any, error: type[Exception], message: str
) -> None:
    server = Server("srv")
    with pytest.raises(error, match=f"^resource 'res://a': {message}"):
        server.add_resource(lambda: "", "res://a", annotations=annotations)
    with pytest.raises(error, match=f"^resource template 'res://{{id}}': {message}"):
        server.add_resource(lambda id: "", "res://{id}", annotations=annotations)
    assert not (server._registry.resources or server._registry.templates)
    helpers: list[tuple[str, Any]] = [
        ("Image", lambda: Image(PNG, "image/png", annotations=annotations)),
        ("Audio", lambda: Audio(b"RIFF", "audio/wav", annotations=annotations)),
        ("EmbeddedResource", lambda: EmbeddedResource("res://x", "t", annotations=annotations)),
        ("ResourceLink", lambda: ResourceLink("res://x", "x", annotations=annotations)),
    ]
    for name, build in helpers:
        with pytest.raises(error, match=f"^{name}: {message}"):
            build()


async def test_good_icons_and_annotations_are_published_as_given() -> None:
    """Every member the schema defines, typed or as mappings (tuples become arrays), and
    members it does not name (the schema allows them) are taken and sent."""
    icons: list[Any] = [
        {"src": ICON, "mimeType": "image/png", "sizes": ("48x48", "any"), "theme": "dark"},
        mcp_types.Icon(src="data:image/png;base64,iVBORw0KGgo=", theme="light"),
        {"src": ICON, "x-vendor": 1},
    ]
    published: list[dict[str, Any]] = [
        {"src": ICON, "mimeType": "image/png", "sizes": ["48x48", "any"], "theme": "dark"},
        {"src": "data:image/png;base64,iVBORw0KGgo=", "theme": "light"},
        {"src": ICON, "x-vendor": 1},
    ]
    server = Server("srv", icons=icons)
    hints = {"readOnlyHint": True, "destructiveHint": False, "title": "T", "x-vendor": "v"}
    server.add_tool(lambda: 1, name="t", annotations=hints, icons=icons)
    server.add_resource(
        lambda: "",
        "res://a",
        icons=icons,
        annotations={"audience": ("user", "assistant"), "priority": 1, "lastModified": "z"},
    )
    server.add_resource(
        lambda id: "", "res://{id}", annotations=mcp_types.Annotations(priority=0.0)
    )
    registry = server._registry
    assert registry.tools["t"].definition["annotations"] == hints
    assert registry.tools["t"].definition["icons"] == published
    assert registry.resources["res://a"].definition["icons"] == published
    assert registry.resources["res://a"].definition["annotations"] == {
        "audience": ["user", "assistant"],
        "priority": 1,
        "lastModified": "z",
    }
    assert registry.templates["res://{id}"].definition["annotations"] == {"priority": 0.0}
    image = Image(PNG, "image/png", annotations={"audience": ["assistant"], "priority": 0.5})
    assert image.to_json()["annotations"] == {"audience": ["assistant"], "priority": 0.5}
    async with open_client(server) as client:
        (tool,) = await client.list_tools()
        assert tool.annotations == mcp_types.ToolAnnotations(
            read_only_hint=True, destructive_hint=False, title="T"
        )
        assert [icon.src for icon in tool.icons or ()] == [ICON, published[1]["src"], ICON]

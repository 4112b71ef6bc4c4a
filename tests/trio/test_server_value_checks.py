"""Values a server describes are checked when they are built or registered, not sent as
they are: MIME types (``server/prompts.mdx``: image and audio data "MUST ... include a
valid MIME type") and resource URIs (``server/resources.mdx``: "Custom URI schemes MUST
be in accordance with RFC3986"; the schema's ``Resource.uri`` is ``format: uri``).
"""

from __future__ import annotations

from typing import Any

import pytest

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

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

"""An error status with a ``WWW-Authenticate`` challenge is worded by its challenge: a
``401`` always, and a ``400`` (RFC 6750 ``invalid_request``: a malformed token) or
``403`` (``insufficient_scope``) that carries one, so that the caller sees what the
server found wrong with the credentials sent."""

from __future__ import annotations

import pytest

from mcp_sansio._json import loads

from .test_http_client_redirects import legacy_client, rpc


@pytest.mark.parametrize(
    ("status", "challenge", "text"),
    [
        (
            400,
            b'Bearer error="invalid_request", error_description="malformed"',
            "HTTP: status 400: the server refused the credentials sent (WWW-Authenticate:"
            ' Bearer error="invalid_request", error_description="malformed")',
        ),
        (
            403,
            b'Bearer error="insufficient_scope", scope="files:write"',
            "HTTP: status 403: the server refused the credentials sent (WWW-Authenticate:"
            ' Bearer error="insufficient_scope", scope="files:write")',
        ),
        (400, None, "HTTP: status 400"),  # (no challenge: a plain status, as before)
        (403, None, "HTTP: status 403"),
        (400, b"", "HTTP: status 400"),
    ],
)
def test_a_400_or_403_with_a_challenge_names_it(
    status: int, challenge: bytes | None, text: str
) -> None:
    client = legacy_client()
    sent = client.post(rpc(2, "tools/call", {"name": "t"}))
    headers = [] if challenge is None else [(b"www-authenticate", challenge)]
    reader = client.response(sent, status, headers)
    (message,) = [loads(m) for m in reader.feed(b"") + reader.feed_eof()]
    assert message["error"]["message"] == text
    data: dict[str, object] = {"httpStatus": status}
    if challenge:
        data["wwwAuthenticate"] = challenge.decode()
    assert message["error"]["data"] == data

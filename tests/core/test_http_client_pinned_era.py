"""A client whose era is pinned does not probe: a refusal is the server's answer. No I/O.

``2026-07-28/basic/versioning``: the probe (and its fallback to ``initialize``) is for
a client that does not know the origin's era; one that does shows the status it got.
"""

from __future__ import annotations

from mcp_sansio import Era, ErrorCode
from mcp_sansio._json import dumps, loads
from mcp_sansio.http import HttpClient, HttpClientConfig

URL = "http://localhost:8000/mcp"


def test_a_pinned_modern_era_is_not_probed() -> None:
    # A 4xx to the first modern request is the server's answer, with its status: no
    # fallback to initialize (the era is pinned), and the era stays modern.
    client = HttpClient(URL, HttpClientConfig(era=Era.MODERN))
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    request = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    reader = client.response(client.post(dumps(request)), 404, ())
    reader.feed(b"<html>Not Found</html>")
    (failure,) = reader.feed_eof()
    error = loads(failure)["error"]
    assert error == {
        "code": ErrorCode.INTERNAL_ERROR,
        "message": "HTTP: status 404",
        "data": {"httpStatus": 404},
    }
    assert not reader.fell_back and client.era is Era.MODERN

"""DPoP over TLS that ``serve_http`` or ``serve_websocket`` serves itself
(``ssl_context=``), without ``dpop_origin``: an origin-form request has no scheme of its
own (RFC 9110 section 7.1: the connection's), so its ``htu`` is ``https://`` (``wss://``)
and the ``Host``, over real sockets on 127.0.0.1 with a throwaway CA (trustme)."""

from __future__ import annotations

import ssl
import time
from functools import partial
from typing import cast

import pytest
import trio

pytest.importorskip("cryptography")

from mcp_sansio._jose import dpop_proof, jwk_thumbprint
from mcp_trio import BearerAuth, Principal, SessionClosed, open_websocket_client, serve_websocket
from mcp_trio._signing import new_dpop_key

from .test_http_support import (
    IO_TIMEOUT,
    POST_HEADERS,
    RawConnection,
    RawResponse,
    initialize_body,
    start_server,
)
from .test_websocket import echo_handlers

KEY = new_dpop_key()


async def verify_token(token: str) -> Principal | None:
    return Principal(subject="alice", dpop_jkt=jwk_thumbprint(KEY.public_jwk))


def _proof(method: str, htu: str, jti: str) -> str:
    """A DPoP proof by ``KEY`` for the token ``t``, a ``method`` request to ``htu``."""
    return dpop_proof(
        jwk=KEY.public_jwk,
        alg=KEY.alg,
        sign=KEY.sign,
        method=method,
        url=htu,
        now=time.time(),
        jti=jti,
        access_token="t",
    )


async def post_with_proof(
    port: int, htu: str, jti: str, client_context: ssl.SSLContext | None
) -> RawResponse:
    """An ``initialize`` POST to ``/mcp`` (origin form) with the token ``t`` and a proof
    whose ``htu`` is ``htu``, over TLS when ``client_context`` is given."""
    tcp = await trio.open_tcp_stream("127.0.0.1", port)
    stream: trio.abc.Stream = tcp
    if client_context is not None:
        stream = trio.SSLStream(tcp, client_context, server_hostname="127.0.0.1")
    proof = _proof("POST", htu, jti)
    headers = (*POST_HEADERS, ("authorization", "DPoP t"), ("dpop", proof))
    # (RawConnection drives any stream: it only sends, receives and closes)
    conn = RawConnection(cast("trio.SocketStream", stream))
    try:
        await conn.send("POST", "/mcp", headers, initialize_body(), host=f"127.0.0.1:{port}")
        return await conn.response()
    finally:
        await conn.aclose()


@pytest.mark.parametrize("tls", [True, False], ids=["https", "http"])
async def test_an_origin_form_requests_htu_has_the_connections_scheme(
    nursery: trio.Nursery, client_context: ssl.SSLContext, server_context: ssl.SSLContext, tls: bool
) -> None:
    """Served over TLS, a proof for ``https://127.0.0.1:port/mcp`` is accepted and one for
    ``http://`` refused (it was the other way round: every correct proof refused);
    served in the clear, the reverse."""
    auth = BearerAuth(verify_token=verify_token, dpop="required")
    server = await start_server(
        nursery, authenticate=auth, ssl_context=server_context if tls else None
    )
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    ours, other = ("https", "http") if tls else ("http", "https")
    context = client_context if tls else None
    with trio.fail_after(IO_TIMEOUT):
        accepted = await post_with_proof(port, f"{ours}://127.0.0.1:{port}/mcp", "a", context)
        refused = await post_with_proof(port, f"{other}://127.0.0.1:{port}/mcp", "b", context)
    assert accepted.status == 200, accepted
    assert refused.status == 401
    assert 'error="invalid_dpop_proof"' in refused.headers["www-authenticate"]


async def test_a_wss_handshakes_htu_has_the_connections_scheme(
    nursery: trio.Nursery, client_context: ssl.SSLContext, server_context: ssl.SSLContext
) -> None:
    """``serve_websocket(ssl_context=...)`` likewise: a handshake's proof for
    ``wss://127.0.0.1:port/mcp`` is accepted, one for ``ws://`` refused."""
    auth = BearerAuth(verify_token=verify_token, dpop="required")
    handle = await nursery.start(
        partial(
            serve_websocket,
            echo_handlers(),
            "127.0.0.1",
            0,
            ssl_context=server_context,
            authenticate=auth,
        )
    )
    url = f"wss://127.0.0.1:{handle.port}/mcp"

    def headers(htu: str, jti: str) -> dict[str, str]:
        return {"Authorization": "DPoP t", "DPoP": _proof("GET", htu, jti)}

    with trio.fail_after(IO_TIMEOUT):
        async with open_websocket_client(
            url, ssl_context=client_context, headers=headers(url, "a")
        ) as session:
            assert session.handshake is not None
        with pytest.raises(SessionClosed, match="handshake failed"):
            async with open_websocket_client(
                url, ssl_context=client_context, headers=headers(url.replace("wss", "ws"), "b")
            ):
                raise AssertionError("unreachable")

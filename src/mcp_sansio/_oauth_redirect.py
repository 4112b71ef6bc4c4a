"""The loopback redirect of a native OAuth client, sans-IO: which request is the one.

A native client (a CLI, a desktop application) receives the authorization response on
a loopback address it listens on for the duration of one authorization (RFC 8252
section 7.3, "Loopback Interface Redirection"; the MCP authorization spec allows
``http`` redirect URIs on ``localhost`` only). Anything on the machine may connect to
that port, and a browser asks for more than the redirect (``/favicon.ico``), so the
listener answers every request and ends only at the one that is the authorization
response: a ``GET`` of the redirect URI's path whose single ``state`` is the one this
authorization sent (RFC 6749 section 10.12, CSRF). :func:`redirect_request` says which
answer each request gets; the binding does the I/O (see
:class:`mcp_trio.LoopbackRedirect`).
"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs, urlsplit

__all__ = ["redirect_request", "redirect_state"]


def redirect_state(authorization_url: str) -> str | None:
    """The ``state`` an authorization request URL carries (``None``: none, or several),
    which its redirect must bring back."""
    values = parse_qs(urlsplit(authorization_url).query).get("state", [])
    return values[0] if len(values) == 1 and values[0] else None


def redirect_request(
    method: str, target: str, *, redirect_uri: str, state: str
) -> tuple[int, str | None]:
    """Whether a request to the loopback listener is the authorization response.

    Args:
        method: the request's method.
        target: its request target (origin form: path and query).
        redirect_uri: the redirect URI the authorization request named (``http``, a
            loopback host, a path; no query of its own).
        state: the ``state`` that request sent.

    Returns:
        ``(200, url)``: it is: ``url`` is the redirect URI with the request's query,
        what :func:`~mcp_sansio.parse_authorization_response` reads (an error
        response with the right ``state`` is one too: the authorization server's
        answer, to report). Otherwise the status to answer and ``None``: ``404``
        another path (the listener keeps waiting), ``405`` another method on the
        redirect path, ``400`` the redirect path without the ``state`` sent (missing,
        another one, or several: a forged or stale redirect is refused, and the real
        one may still come).
    """
    base = urlsplit(redirect_uri)
    path, _, query = target.partition("?")
    if path != (base.path or "/"):
        return 404, None
    if method != "GET":
        return 405, None
    states = parse_qs(query, keep_blank_values=True).get("state", [])
    # One state, compared in constant time (it guards the code that came with it).
    if len(states) != 1 or not hmac.compare_digest(states[0].encode(), state.encode()):
        return 400, None
    return 200, f"{base.scheme}://{base.netloc}{base.path or '/'}?{query}"

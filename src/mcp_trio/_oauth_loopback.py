"""The redirect of a native OAuth client: a one-shot HTTP listener on loopback.

Theory of operation
-------------------
:class:`LoopbackRedirect` is what a command-line or desktop application passes as
``OAuth(redirect=...)`` instead of writing its own ``on_authorize``: its
:attr:`~LoopbackRedirect.redirect_uri` is ``http://127.0.0.1:PORT/callback`` (RFC 8252
section 7.3, loopback interface redirection; section 8.3: an IP literal, not
``localhost``, which may resolve elsewhere), and :meth:`~LoopbackRedirect.on_authorize`,
for each authorization:

1. listens on that address (nothing listens between authorizations);
2. shows the user the authorization URL (``on_url``, stderr by default) and, unless
   told not to, opens it in the browser (``webbrowser`` in a worker thread, which the
   flow does not wait for: the user may copy the URL instead);
3. answers every request until the one that is the authorization response (the rules
   are :func:`mcp_sansio.redirect_request`: the redirect path, the ``state`` this
   authorization sent), to which it answers a small page the user may close; then it
   stops listening and returns that URL, which the flow checks
   (:func:`mcp_sansio.parse_authorization_response`).

Anything on the machine may connect to the port, so whatever goes wrong with one
connection (a request h11 refuses, a reset) drops that connection alone (logged), a
``HEAD`` is answered with no body, and everything is bounded: one request per
connection (``connection: close``; what the peer still sends, up to 64 KiB, is read
before closing, so that the answer is not lost to a reset), its head at most
``max_request_size`` bytes and ``max_headers`` headers (a larger one is answered ``431``
or ``400``), each connection ``connection_timeout`` seconds, at most ``max_connections``
at once (more are closed as they come), and the whole wait ``timeout`` seconds (besides
``OAuth``'s ``authorize_timeout``, which bounds the whole flow).

The port is chosen when the :class:`LoopbackRedirect` is made (``port=0``: a free one,
found by binding and letting go; another program could take it before the listener
does, which then fails that authorization with a message saying so). It must stay the
same while a registration is in use: authorization servers compare redirect URIs
exactly (``2026-07-28/basic/authorization/security-considerations``, "Redirect URI
Validation").
"""

from __future__ import annotations

import errno
import html
import http
import logging
import socket
import sys
import webbrowser
from collections.abc import Callable
from contextlib import suppress
from typing import Final, TextIO, final
from urllib.parse import parse_qs, urlsplit

import h11
import trio

from mcp_sansio import OAuthError, redirect_request, redirect_state
from mcp_sansio._oauth import _described, _error_text

from ._util import check_count, check_seconds, terminal_safe, url_host

__all__ = ["LoopbackRedirect"]

logger = logging.getLogger("mcp_trio")

_LOOPBACK_HOSTS: Final = ("127.0.0.1", "::1")
_READ_SIZE: Final = 4096
_LINGER_SIZE: Final = 65_536


def show_url(url: str, file: TextIO | None = None) -> None:
    """Show the authorization URL to the user on ``file`` (default: stderr): the
    default ``on_url``. The URL is made of the authorization server's metadata, so it
    is shown :func:`terminal_safe` (a control character as ``\\x1b``): what the client
    refuses in an endpoint (:func:`mcp_sansio.check_endpoint`), refused again here."""
    print(
        f"Open this URL to authorize:\n  {terminal_safe(url)}", file=file or sys.stderr, flush=True
    )


@final
class LoopbackRedirect:
    """Receive the authorization response on ``http://127.0.0.1:PORT/PATH``: pass it
    as ``OAuth(redirect=LoopbackRedirect())`` (see the module docs).

    Args:
        port: the port (``0``: a free one, chosen now). Give a fixed one when the
            redirect URI is registered beforehand with the authorization server.
        path: the redirect URI's path.
        host: ``"127.0.0.1"`` or ``"::1"``.
        open_browser: open the authorization URL in the user's browser.
        opener: how to open it (default :func:`webbrowser.open`); it runs in a worker
            thread, and may return ``False`` or raise (logged at ``WARNING``): the user
            still has the URL.
        on_url: how to show the URL to the user (default: printed on stderr).
        timeout: seconds to wait for the redirect.
        connection_timeout: seconds one connection may take to send its request.
        max_connections: connections served at once.
        max_request_size: the largest request head, in bytes.
        max_headers: the most header fields in a request.

    Raises:
        ValueError: ``host`` is not a loopback address, ``path`` does not start with
            ``/`` (or has a query or fragment), ``port`` is not an ``int`` from 0 to
            65535, a bound is not a positive ``int`` (not a ``bool``), or a timeout
            not a positive finite number.
        OSError: ``port=0`` and no port could be found.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        path: str = "/callback",
        host: str = "127.0.0.1",
        open_browser: bool = True,
        opener: Callable[[str], object] | None = None,
        on_url: Callable[[str], object] | None = None,
        timeout: float = 300.0,
        connection_timeout: float = 10.0,
        max_connections: int = 8,
        max_request_size: int = 8192,
        max_headers: int = 64,
    ) -> None:
        if host not in _LOOPBACK_HOSTS:
            raise ValueError(f"host must be 127.0.0.1 or ::1 (RFC 8252 section 8.3): {host!r}")
        if not path.startswith("/") or any(c in path for c in "?#") or "//" in path:
            raise ValueError(f"path must be an absolute path with no query: {path!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer from 0 to 65535, not {port!r}")
        check_seconds("timeout", timeout)
        check_seconds("connection_timeout", connection_timeout)
        check_count("max_connections", max_connections)
        check_count("max_request_size", max_request_size)
        check_count("max_headers", max_headers)
        self.host: Final = host
        self.port: Final = port if port else _free_port(host)
        self.path: Final = path
        self.open_browser: Final = open_browser
        self.opener: Final = opener if opener is not None else webbrowser.open
        self.on_url: Final = on_url if on_url is not None else show_url
        self.timeout: Final = timeout
        self.connection_timeout: Final = connection_timeout
        self.max_connections: Final = max_connections
        self.max_request_size: Final = max_request_size
        self.max_headers: Final = max_headers
        literal = url_host(host)
        self.redirect_uri: Final = f"http://{literal}:{self.port}{path}"
        """The redirect URI to register (``OAuth`` does, with ``redirect=``)."""

    async def on_authorize(self, url: str) -> str:
        """Show ``url`` (and open the browser), wait for the redirect and return the
        URL it arrived at: ``OAuth``'s ``on_authorize``.

        Raises:
            OAuthError: ``url`` has no ``state``, the port is taken, the listener
                failed (``accept`` raised an ``OSError``), or no redirect came within
                ``timeout``. A connection that fails (a request h11 refuses, a reset
                socket) is logged and dropped: the wait goes on. What ``on_url``
                raises is raised as is.
        """
        state = redirect_state(url)
        if state is None:
            raise OAuthError("the authorization URL has no state: refused")
        listener = await self._listen()
        outcome: str | OSError | None = None
        async with listener:
            self.on_url(url)  # (outside the nursery: what it raises is raised as is)
            # No task in this nursery raises: a connection's failure is that connection's
            # alone (_serve), the listener's ends the wait (its OSError returned), a
            # browser that does not open is logged (_open). No ExceptionGroup reaches the
            # caller.
            async with trio.open_nursery() as nursery:
                if self.open_browser:
                    nursery.start_soon(self._open, url, name="mcp oauth browser")
                with trio.move_on_after(self.timeout):
                    outcome = await self._accept(listener, state)
                nursery.cancel_scope.cancel()
        if outcome is None:
            raise OAuthError(f"no authorization response arrived within {self.timeout:g} seconds")
        if isinstance(outcome, OSError):
            raise OAuthError(
                f"the redirect listener on {self.redirect_uri} failed: {outcome}"
            ) from outcome
        return outcome

    async def _listen(self) -> trio.SocketListener:
        sock = trio.socket.socket(_family(self.host), socket.SOCK_STREAM)
        try:
            if sys.platform != "win32":  # (on Windows it would let others share the port)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            await sock.bind((self.host, self.port))
            sock.listen(self.max_connections)
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                raise OAuthError(
                    f"the redirect port {self.port} is in use by another program"
                ) from exc
            raise OAuthError(f"cannot listen on {self.redirect_uri}: {exc}") from exc
        return trio.SocketListener(sock)

    async def _open(self, url: str) -> None:
        # The user has the URL (on_url): a browser that does not open is logged only.
        try:
            opened = await trio.to_thread.run_sync(self.opener, url, abandon_on_cancel=True)
        except Exception as exc:
            logger.debug("OAuth: the browser could not be opened", exc_info=True)
            logger.warning("OAuth: the browser could not be opened: %s raised", type(exc).__name__)
            return
        if opened is False:
            logger.warning("OAuth: no browser could be opened: open the URL shown")

    async def _accept(self, listener: trio.SocketListener, state: str) -> str | OSError:
        """Serve connections until one brings the redirect (its URL is returned) or the
        listener fails (its error is returned). Either cancels what is still served."""
        limiter = trio.CapacityLimiter(self.max_connections)
        outcome: list[str | OSError] = []
        async with trio.open_nursery() as serving:

            def end(value: str | OSError) -> None:
                if not outcome:
                    outcome.append(value)
                    serving.cancel_scope.cancel()

            while not outcome:
                try:
                    stream = await listener.accept()
                except OSError as exc:  # (out of file descriptors, say)
                    end(exc)
                    break
                try:
                    limiter.acquire_on_behalf_of_nowait(stream)
                except trio.WouldBlock:
                    await stream.aclose()  # full: the browser will try again
                    continue
                serving.start_soon(self._serve, stream, limiter, state, end)
        return outcome[0]

    async def _serve(
        self,
        stream: trio.SocketStream,
        limiter: trio.CapacityLimiter,
        state: str,
        end: Callable[[str], None],
    ) -> None:
        try:
            with trio.move_on_after(self.connection_timeout):
                url = await self._answer(stream, state)
                if url is not None:
                    end(url)  # (its answer is sent)
                await _linger(stream)
        except Exception as exc:
            # Anything on the machine may connect: whatever goes wrong with one
            # connection (h11, the socket) drops that connection, never the wait.
            logger.debug("OAuth: a connection to the redirect listener failed", exc_info=True)
            logger.warning("OAuth: a connection to the redirect listener failed: %r", exc)
        finally:
            limiter.release_on_behalf_of(stream)
            await trio.aclose_forcefully(stream)

    async def _answer(self, stream: trio.SocketStream, state: str) -> str | None:
        """Read one request and answer it; for the redirect, return its URL."""
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.max_request_size)
        status: int
        url: str | None = None
        received = 0
        head = False
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(_READ_SIZE)
                    if not data:
                        return None
                    received += len(data)
                    conn.receive_data(data)
                    continue
                if isinstance(event, h11.Request):
                    head = event.method == b"HEAD"
                    # (h11 bounds a head still incomplete; one that came whole, here)
                    if received > self.max_request_size or len(event.headers) > self.max_headers:
                        status = 431
                    else:
                        status, url = redirect_request(
                            event.method.decode("latin-1"),
                            event.target.decode("latin-1"),
                            redirect_uri=self.redirect_uri,
                            state=state,
                        )
                    break
                return None  # (a ConnectionClosed before any request)
        except h11.RemoteProtocolError as exc:
            status = exc.error_status_hint
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return None
        body = _page(status, url).encode()
        headers = [
            ("content-type", "text/html; charset=utf-8"),
            ("content-length", str(len(body))),
            ("connection", "close"),
            ("cache-control", "no-store"),
            # The page must not pass the code on (RFC 8252 section 8.10 / RFC 6749 10.6).
            ("referrer-policy", "no-referrer"),
            ("x-content-type-options", "nosniff"),
        ]
        reason = http.HTTPStatus(status).phrase.encode()
        response = h11.Response(status_code=status, headers=headers, reason=reason)
        # (an answer to HEAD has the headers a GET would have, and no body: RFC 9110 9.3.2)
        data = conn.send(response) if head else conn.send(response) + conn.send(h11.Data(data=body))
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):  # (it left)
            await stream.send_all(data)
        return url


async def _linger(stream: trio.SocketStream) -> None:
    """After the answer: say we are done and read what the peer still sends (at most
    ``_LINGER_SIZE`` bytes) until it closes, so that closing with unread input (a request
    over the bound) does not reset the connection before the peer reads the answer."""
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_eof()
        left = _LINGER_SIZE
        while left > 0 and (chunk := await stream.receive_some(_READ_SIZE)):
            left -= len(chunk)


def _page(status: int, url: str | None) -> str:
    if url is not None:
        # The peer's text: kept to the characters RFC 6749 allows, as in the error
        # (parse_authorization_response), then escaped.
        query = parse_qs(urlsplit(url).query)
        error = _error_text(query.get("error", [""])[0])
        if error:
            detail = _error_text(query.get("error_description", [""])[0])
            message = f"The authorization server refused: {_described(error, detail)}"
        else:
            message = "Authorization received. You may close this window."
    elif status == 404:
        message = "Not found."
    else:
        message = "This is not the authorization response this application is waiting for."
    text = html.escape(message)
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>Authorization</title>"
        f"</head><body><p>{text}</p></body></html>"
    )


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _free_port(host: str) -> int:
    with socket.socket(_family(host), socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
    return port

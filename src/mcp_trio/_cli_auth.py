"""How ``mcp-trio list``/``call`` authorize to an HTTP or WebSocket server: a static
bearer token, or OAuth 2.1 (interactive through the browser, or the client credentials
grant).

This module is imported at start-up for its :class:`AuthOptions` only: the OAuth
binding (h11, the loopback receiver, the file store) is imported by :func:`client_auth`,
for a URL target that asks for it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

import attrs

from ._cli_util import UsageError
from ._util import is_url

if TYPE_CHECKING:
    from ._oauth import OAuth

__all__ = [
    "DEFAULT_REDIRECT_PORT",
    "AuthOptions",
    "client_auth",
    "default_token_store",
    "token_namespace",
]

DEFAULT_REDIRECT_PORT: Final = 33418
"""The loopback redirect port of ``--oauth`` (``--redirect-port``): the same at every
run, since authorization servers compare a redirect URI with the registered one
exactly, and a registration kept in the token store is used again."""


@attrs.frozen(kw_only=True)
class AuthOptions:
    """The authorization flags of ``list`` and ``call``."""

    bearer: str | None = attrs.field(default=None, repr=False)
    """``--bearer`` (or the variable ``--bearer-env`` names): a static token."""
    oauth: bool = False
    """``--oauth``: authorize interactively (the browser, a loopback redirect)."""
    browser: bool = True
    """Open the browser (``--no-browser``: print the URL only)."""
    client_id: str | None = None
    """``--client-id``: a pre-registered client."""
    client_secret: str | None = attrs.field(default=None, repr=False)
    """``--client-secret`` (or the variable ``--client-secret-env`` names; without
    ``--oauth``: the client credentials grant)."""
    issuer: str | None = None
    """``--issuer``: the authorization server the client is registered at."""
    scope: str | None = None
    """``--scope``: scopes to ask for when the server does not say."""
    token_store: str | None = None
    """``--token-store``: a file, ``none``, or ``None`` for the default file (none
    with ``--redirect-port 0``)."""
    redirect_port: int | None = None
    """``--redirect-port``; ``None``: :data:`DEFAULT_REDIRECT_PORT`; ``0``: any free
    port, and nothing kept between runs."""

    @property
    def uses_oauth(self) -> bool:
        """Whether an OAuth flag was given."""
        return self.oauth or self.client_id is not None or self.client_secret is not None

    def check(self) -> None:
        """The flags make sense together (whatever the target).

        Raises:
            UsageError: they do not.
        """
        if self.bearer is not None and self.uses_oauth:
            raise UsageError("--bearer is a token of its own: not with --oauth or --client-*")
        if self.client_secret is not None and (self.client_id is None or self.issuer is None):
            raise UsageError(
                "--client-secret needs --client-id and --issuer (a secret goes only to "
                "the authorization server it was issued by)"
            )
        if self.client_id is not None and not self.oauth and self.client_secret is None:
            raise UsageError("--client-id needs --oauth (a user) or --client-secret (none)")
        if self.issuer is not None and self.client_secret is None and self.client_id is None:
            raise UsageError("--issuer is for --client-id")
        given = [
            flag
            for flag, value in (
                ("--no-browser", not self.browser),
                ("--redirect-port", self.redirect_port is not None),
            )
            if value
        ]
        if given and not self.oauth:
            raise UsageError(f"{', '.join(given)}: for --oauth only")
        if self.redirect_port == 0 and self.token_store not in (None, "none"):
            raise UsageError(
                "--redirect-port 0 keeps nothing between runs (a registration is for one "
                "redirect URI, and the port changes): not with --token-store FILE"
            )
        if not self.uses_oauth:
            extra = [
                flag
                for flag, value in (("--scope", self.scope), ("--token-store", self.token_store))
                if value is not None
            ]
            if extra:
                raise UsageError(f"{', '.join(extra)}: for --oauth or --client-secret only")


def default_token_store() -> Path:
    """Where ``--oauth`` keeps tokens by default: ``mcp-trio/oauth.json`` in the
    user's configuration directory (``$XDG_CONFIG_HOME``, else ``~/.config``;
    ``%APPDATA%`` on Windows, else as elsewhere).

    Raises:
        UsageError: there is no home directory to find it in (no ``HOME``, and a user
            with no entry in the password database, as in a container).
    """
    base = os.environ.get("APPDATA") if sys.platform == "win32" else None
    base = base or os.environ.get("XDG_CONFIG_HOME")
    if not base:
        try:
            base = str(Path.home() / ".config")
        except RuntimeError:  # (Path.home: "Could not determine home directory.")
            raise UsageError(
                "no home directory for the default token store: give --token-store FILE "
                "(or --token-store none)"
            ) from None
    return Path(base) / "mcp-trio" / "oauth.json"


def token_namespace(options: AuthOptions, redirect_uri: str | None) -> str:
    """Whose tokens these are, as the token store's namespace: the user through the
    redirect (a registration is for one redirect URI) as ``--client-id`` or the client
    registered there, or the client itself (the client credentials grant). The store
    keys tokens by resource and issuer: without it, a run as one identity would use
    another's token."""
    if redirect_uri is not None:
        user = f"authorization_code {redirect_uri}"
        return user if options.client_id is None else f"{user} {options.client_id}"
    return f"client_credentials {options.client_id}"


def client_auth(
    options: AuthOptions, url: str, headers: Mapping[str, str], err: TextIO
) -> tuple[OAuth | None, dict[str, str]]:
    """The ``auth=`` and the headers for a client of ``url``.

    Raises:
        UsageError: an OAuth flag for a target that is not ``http(s)://`` or
            ``ws(s)://``, a second ``Authorization``, or no home directory for the
            default token store.
    """
    headers = dict(headers)
    if (options.bearer is not None or options.uses_oauth) and any(
        name.lower() == "authorization" for name in headers
    ):
        raise UsageError("--header Authorization and an authorization flag: give one")
    if options.bearer is not None:
        headers["Authorization"] = f"Bearer {options.bearer}"
        return None, headers
    if not options.uses_oauth:
        return None, headers
    if not is_url(url):
        raise UsageError("--oauth and --client-* are for http(s):// and ws(s):// targets")
    # Before anything is bound or imported: a usage error is the first thing to say.
    # With --redirect-port 0, a new redirect URI at each run: what a file kept would
    # never serve again (a registration is for its redirect URI), and each run would
    # add a namespace to it. Kept in memory instead.
    path = None
    if options.token_store != "none" and options.redirect_port != 0:
        path = default_token_store() if options.token_store is None else options.token_store
    # The OAuth binding, for this target only (see the module docstring).
    from mcp_sansio import ClientCredentials  # noqa: PLC0415

    from ._oauth import InMemoryOAuthStorage, OAuth, OAuthStorage  # noqa: PLC0415
    from ._oauth_loopback import LoopbackRedirect, show_url  # noqa: PLC0415
    from ._oauth_store import FileOAuthStorage  # noqa: PLC0415

    client = None
    if options.client_id is not None:
        client = ClientCredentials(
            client_id=options.client_id, client_secret=options.client_secret, issuer=options.issuer
        )
    redirect = None
    if options.oauth:
        port = DEFAULT_REDIRECT_PORT if options.redirect_port is None else options.redirect_port

        # (show_url shows the URL, made of the authorization server's metadata, terminal-safe)
        def on_url(url: str) -> None:
            show_url(url, file=err)

        redirect = LoopbackRedirect(port=port, open_browser=options.browser, on_url=on_url)
    storage: OAuthStorage
    if path is None:
        storage = InMemoryOAuthStorage()
    else:
        redirect_uri = None if redirect is None else redirect.redirect_uri
        storage = FileOAuthStorage(path, namespace=token_namespace(options, redirect_uri))
        reason = storage.unreadable()
        if reason is not None:  # (the library logs it; the CLI hides logs without -v)
            print(
                f"mcp-trio: warning: the token store {path} cannot be read (it {reason}): "
                "it is left as it is, and this run keeps its tokens in memory (repair or "
                "remove it)",
                file=err,
            )
    auth = OAuth(
        redirect=redirect,
        client=client,
        client_name="mcp-trio",
        scope=options.scope,
        storage=storage,
    )
    return auth, headers

"""What the OAuth tests (``test_oauth.py``, ``test_oauth_e2e.py``) share."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from mcp_trio import OAuth, fetch_authorization_redirect

REDIRECT = "http://127.0.0.1:9/callback"


def s256(verifier: str) -> str:
    """The PKCE ``S256`` challenge of ``verifier``."""
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def oauth(**kwargs: Any) -> OAuth:
    """An :class:`OAuth` with the test redirect URI and a user agent that follows the
    authorization server's redirect at once; ``kwargs`` override."""
    options: dict[str, Any] = {
        "redirect_uri": REDIRECT,
        "on_authorize": fetch_authorization_redirect,
    }
    return OAuth(**{**options, **kwargs})

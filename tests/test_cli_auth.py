"""``mcp-trio list``/``call`` authorization flags: ``--bearer``, ``--oauth`` (the
loopback receiver, the browser, the token store), ``--client-*``; what they refuse;
and that the CLI loads the OAuth binding for an HTTP target that asks for it only.

The protected server and its fake authorization server (``tests/trio/test_oauth_e2e``)
run in a thread of their own; the browser is ``urllib`` (it follows the authorization
server's redirect to the CLI's listener on 127.0.0.1)."""

from __future__ import annotations

import base64
import json
import socket
import stat
import subprocess
import sys
import urllib.parse
import urllib.request
import webbrowser
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import attrs
import pytest

from mcp_trio import (
    ClientCredentials,
    FileOAuthStorage,
    InMemoryOAuthStorage,
    LoopbackRedirect,
    OAuth,
)
from mcp_trio._cli import main
from mcp_trio._cli_auth import AuthOptions, client_auth, default_token_store
from mcp_trio._cli_util import UsageError

from .trio.test_http_support import served_in_thread
from .trio.test_oauth import start_fake
from .trio.test_oauth_e2e import Setup, start
from .trio.test_oauth_websocket import start_ws


@pytest.fixture
def protected() -> Iterator[Setup]:
    """The protected server and its authorization server, in another thread."""
    with served_in_thread(partial(start, prm_scopes=["mcp"])) as setup:
        yield setup


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The user's browser: it visits the URL (following the redirect back to the
    CLI's listener) and records it."""
    visited: list[str] = []

    def visit(url: str) -> bool:
        visited.append(url)
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert b"close this window" in answer.read()
        return True

    monkeypatch.setattr(webbrowser, "open", visit)
    return visited


def test_oauth_authorizes_in_the_browser_and_the_token_store_serves_the_next_run(
    protected: Setup, browser: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "mcp-trio" / "oauth.json"
    # One port at both runs: the registration, and the tokens, are for its redirect URI.
    port = str(LoopbackRedirect().port)
    argv = ["call", protected.url, "whoami", "--oauth", "--redirect-port", port]
    argv += ["--token-store", str(store)]
    assert main(argv) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert out.strip() == "alice ['mcp']"
    assert "Open this URL to authorize:" in err and browser[0] in err
    assert browser[0].startswith(f"{protected.asrv.issuer}/authorize?")
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    # The next run finds the token: no browser, no authorization; its first request
    # carries it (no 401 first, nor discovery: nothing asked of the authorization server).
    asked, protected.posts[:] = len(protected.asrv.requests), []
    assert main([*argv[:-2], "--token-store", str(store), "-q"]) == 0
    assert capsys.readouterr().out.strip() == "alice ['mcp']"
    assert len(browser) == 1 and len(protected.asrv.authorizations) == 1
    assert protected.posts and "" not in protected.posts
    assert len(protected.asrv.requests) == asked


def test_a_head_request_to_the_listener_does_not_end_the_authorization(
    protected: Setup, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def head_then_visit(url: str) -> bool:  # something else asks first (HEAD is CORS-safe)
        redirect = urllib.parse.unquote(url.partition("redirect_uri=")[2].partition("&")[0])
        port = urllib.parse.urlsplit(redirect).port
        with socket.create_connection(("127.0.0.1", port), timeout=10) as probe:
            probe.sendall(b"HEAD / HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            assert probe.recv(100).startswith(b"HTTP/1.1 404 ")
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert b"close this window" in answer.read()
        return True

    monkeypatch.setattr(webbrowser, "open", head_then_visit)
    argv = ["call", protected.url, "whoami", "--oauth", "--redirect-port", "0"]
    assert main([*argv, "--token-store", "none"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == "alice ['mcp']"


def test_without_a_token_store_every_run_asks(
    protected: Setup, browser: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["list", protected.url, "tools", "--oauth", "--redirect-port", "0"]
    argv += ["--token-store", "none"]
    assert main(argv) == 0 and main(argv) == 0, capsys.readouterr().err
    assert "whoami" in capsys.readouterr().out
    assert len(browser) == 2


def test_with_redirect_port_0_nothing_is_kept_between_runs(
    protected: Setup,
    browser: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A new port, so a new redirect URI, at each run: a registration (and its tokens)
    # kept in the default file would never serve again, and each run would add its
    # own namespace to the file, for good.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("APPDATA", raising=False)
    argv = ["list", protected.url, "tools", "--oauth", "--redirect-port", "0"]
    assert main(argv) == 0 and main(argv) == 0, capsys.readouterr().err
    assert len(browser) == 2 and len(protected.asrv.authorizations) == 2
    assert list(tmp_path.iterdir()) == []  # (no store written)
    store = ["--token-store", str(tmp_path / "oauth.json")]
    assert main([*argv, *store]) == 2
    assert "--redirect-port 0 keeps nothing between runs" in capsys.readouterr().err


def test_a_refused_authorization_is_one_line(
    protected: Setup, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def deny(url: str) -> bool:  # the user says no: the AS redirects with an error
        state = url.partition("state=")[2].partition("&")[0]
        redirect = url.partition("redirect_uri=")[2].partition("&")[0]
        iss = urllib.parse.quote(protected.asrv.issuer, safe="")
        back = urllib.parse.unquote(redirect) + f"?error=access_denied&state={state}&iss={iss}"
        urllib.request.urlopen(back, timeout=10).close()
        return True

    monkeypatch.setattr(webbrowser, "open", deny)
    argv = ["list", protected.url, "--oauth", "--redirect-port", "0", "--token-store", "none"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "mcp-trio: error: cannot authorize at" in err and "access_denied" in err
    assert "Traceback" not in err


def test_a_static_bearer_token(
    protected: Setup, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    protected.asrv.tokens["static-1"] = (frozenset({"mcp"}), protected.url, 1e12)
    assert main(["call", protected.url, "whoami", "--bearer", "static-1"]) == 0
    assert capsys.readouterr().out.strip() == "alice ['mcp']"
    monkeypatch.setenv("MY_TOKEN", "static-1")
    assert main(["call", protected.url, "whoami", "--bearer-env", "MY_TOKEN"]) == 0
    assert capsys.readouterr().out.strip() == "alice ['mcp']"
    assert protected.accepted == ["static-1"] * len(protected.accepted)
    assert main(["call", protected.url, "whoami", "--bearer", "wrong"]) == 1
    assert "status 401" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--bearer", "x", "--oauth"], "--bearer is a token of its own"),
        (["--bearer", "x", "--bearer-env", "HOME"], "not allowed with argument --bearer"),
        (["--bearer-env", "MCP_TRIO_TEST_UNSET"], "--bearer-env: the variable"),
        (["--client-secret", "s", "--client-secret-env", "HOME"], "not allowed with"),
        (
            ["--client-id", "c", "--issuer", "https://as", "--client-secret-env", "MCP_TRIO_X"],
            "--client-secret-env: the variable MCP_TRIO_X is not set",
        ),
        (["--client-secret-env", "HOME", "--client-id", "c"], "needs --client-id and --issuer"),
        (["--client-secret", "s", "--client-id", "c"], "needs --client-id and --issuer"),
        (["--client-id", "c"], "--client-id needs --oauth"),
        (["--issuer", "https://as.example"], "--issuer is for --client-id"),
        (["--no-browser"], "for --oauth only"),
        (["--redirect-port", "9000"], "for --oauth only"),
        (["--scope", "mcp"], "--scope: for --oauth"),
        (["--token-store", "none"], "--token-store: for --oauth"),
        (["--oauth", "--redirect-port", "0", "--token-store", "x.json"], "not with --token-store"),
        (["--oauth", "-H", "Authorization: Bearer x"], "give one"),
    ],
)
def test_flags_that_do_not_go_together(
    args: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["list", "http://127.0.0.1:9/mcp", *args]) == 2
    assert fragment in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"not json", b"[]", b" " * (1024 * 1024 + 1)])
def test_a_token_store_that_cannot_be_read_is_told_and_left_alone(
    protected: Setup,
    browser: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
) -> None:
    # The store never writes over a file it cannot read (other identities' tokens may
    # be in it), so every run would ask again: without -v the log would not say why.
    path = tmp_path / "oauth.json"
    path.write_bytes(content)
    port = str(LoopbackRedirect().port)
    argv = ["call", protected.url, "whoami", "--oauth", "--redirect-port", port]
    assert main([*argv, "--token-store", str(path)]) == 0
    err = capsys.readouterr().err
    assert f"the token store {path} cannot be read (it is " in err
    assert path.read_bytes() == content, browser
    assert len(browser) == 1, browser


def test_the_token_store_keeps_each_identity_apart(
    protected: Setup,
    browser: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = ["--token-store", str(tmp_path / "oauth.json")]
    port = str(LoopbackRedirect().port)
    user = ["call", protected.url, "whoami", "--oauth", "--redirect-port", port, *store]
    assert main(user) == 0, capsys.readouterr().err
    assert len(browser) == 1
    used = len(protected.accepted)  # (the user's token, at each request)
    # A service (the client credentials grant) does not use the user's token: it asks
    # for its own, which this authorization server refuses.
    monkeypatch.setenv("SVC_SECRET", "s3cret")
    service = ["--client-id", "svc", "--client-secret-env", "SVC_SECRET"]
    service += ["--issuer", protected.asrv.issuer]
    assert main(["call", protected.url, "whoami", *service, *store]) == 1
    assert "unsupported_grant_type" in capsys.readouterr().err
    [*_, (_, _, asked)] = [r for r in protected.asrv.requests if r[1] == "/token"]
    basic = base64.b64decode(asked["authorization"].removeprefix("Basic "))
    assert basic == b"svc:s3cret"  # the secret from the environment
    first, *then = [t["grant_type"] for t in protected.asrv.token_requests]
    assert first == "authorization_code" and set(then) == {"client_credentials"}
    assert len(protected.accepted) == used  # the user's token went nowhere
    # Another client ID (the user through it) is asked again; then each finds its own.
    assert main([*user, "--client-id", "other"]) == 0
    assert main(user) == 0 and main([*user, "--client-id", "other"]) == 0
    assert len(browser) == 2 and len(protected.asrv.authorizations) == 2
    assert protected.asrv.authorizations[1]["client_id"] == "other"


def test_a_legacy_server_without_resource_metadata_is_authorized_at_its_origin(
    browser: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # 2025-03-26: no metadata.
    with served_in_thread(partial(start_fake, no_prm=True)) as fake:
        # (port 0: the default port is one for the whole machine, and test runs share it)
        argv = [
            "list",
            fake.url,
            "tools",
            "--oauth",
            "--redirect-port",
            "0",
            "--token-store",
            "none",
        ]
        for era in ("legacy", "auto"):
            assert main([*argv, "--era", era]) == 0, capsys.readouterr().err
            assert "echo" in capsys.readouterr().out
        # The modern era requires the metadata.
        assert main([*argv, "--era", "modern"]) == 1
        assert "no protected-resource metadata" in capsys.readouterr().err
    assert len(browser) == 2


def test_with_no_home_directory_only_the_default_token_store_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pwd = pytest.importorskip("pwd")

    def no_entry(uid: int) -> object:  # a uid with no passwd entry (docker run --user N)
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    monkeypatch.setattr(sys, "platform", "linux")
    for name in ("HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert main(["--version"]) == 0
    assert main(["list", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "mcp-trio/oauth.json in the user's configuration directory" in out
    assert main(["list", "http://127.0.0.1:9/mcp", "--oauth"]) == 2
    assert "no home directory for the default token store: give --token-store" in (
        capsys.readouterr().err
    )
    with pytest.raises(UsageError, match="--token-store"):
        default_token_store()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert default_token_store() == tmp_path / "mcp-trio" / "oauth.json"


def test_oauth_authorizes_at_a_websocket_server(
    browser: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with served_in_thread(start_ws) as protected:
        argv = ["call", protected.url, "whoami", "--oauth", "--redirect-port", "0"]
        assert main([*argv, "--token-store", "none"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == "alice ['mcp']"
    assert len(browser) == 1 and len(protected.asrv.authorizations) == 1
    # authorize() before connecting: the first handshake of the session has the token.
    assert [h.header("authorization") is not None for h in protected.heads] == [False, True]


def test_the_help_says_which_values_other_users_see(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--bearer and --client-secret are visible to other users of this machine" in out
    assert "--client-secret-env NAME" in out
    assert "authorization (http(s):// and ws(s):// targets):" in out  # (--oauth too)


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        ("python -c pass", "are for URL targets"),
    ],
)
def test_oauth_is_for_http_targets(
    target: str, fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["list", target, "--oauth"]) == 2
    assert fragment in capsys.readouterr().err


def test_what_the_flags_build() -> None:
    url = "https://mcp.example/mcp"
    auth, headers = client_auth(AuthOptions(bearer="t"), "wss://x/mcp", {"x-a": "1"}, sys.stderr)
    assert auth is None and headers == {"x-a": "1", "Authorization": "Bearer t"}
    options = AuthOptions(
        oauth=True, browser=False, redirect_port=8123, token_store="/tmp/x.json", scope="a b"
    )
    auth, _ = client_auth(options, url, {}, sys.stderr)
    assert isinstance(auth, OAuth) and auth.redirect_uri == "http://127.0.0.1:8123/callback"
    assert auth.scope == "a b" and auth.client is None
    assert isinstance(auth.storage, FileOAuthStorage)
    assert auth.storage.namespace == "authorization_code http://127.0.0.1:8123/callback"
    auth, _ = client_auth(attrs.evolve(options, client_id="c"), url, {}, sys.stderr)
    assert isinstance(auth, OAuth) and isinstance(auth.storage, FileOAuthStorage)
    assert auth.storage.namespace == "authorization_code http://127.0.0.1:8123/callback c"
    options = AuthOptions(client_id="c", client_secret="s", issuer="https://as.example")
    auth, _ = client_auth(options, url, {}, sys.stderr)
    assert auth is not None and auth.on_authorize is None  # the client credentials grant
    assert auth.client is not None and auth.client.client_secret == "s"
    assert isinstance(auth.storage, FileOAuthStorage) and auth.storage.path == default_token_store()
    assert auth.storage.namespace == "client_credentials c"
    options = AuthOptions(oauth=True, redirect_port=0)  # (the default store: not used)
    auth, _ = client_auth(options, url, {}, sys.stderr)
    assert auth is not None and isinstance(auth.storage, InMemoryOAuthStorage)


async def test_the_redirect_uri_is_in_the_namespace_alone(tmp_path: Path) -> None:
    path = tmp_path / "oauth.json"
    options = AuthOptions(oauth=True, browser=False, redirect_port=8123, token_store=str(path))
    auth, _ = client_auth(options, "https://mcp.example/mcp", {}, sys.stderr)
    assert auth is not None
    await auth.storage.save_client("https://as.example", ClientCredentials(client_id="c"))
    namespace = "authorization_code http://127.0.0.1:8123/callback"
    assert json.loads(path.read_text()) == {
        "namespaces": {
            namespace: {
                "clients": {
                    "https://as.example": {
                        "client_id": "c",
                        "client_secret": None,
                        "issuer": None,
                        "token_endpoint_auth_method": None,
                    }
                }
            }
        }
    }


def test_the_default_token_store_is_in_the_users_config_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert default_token_store() == tmp_path / "mcp-trio" / "oauth.json"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert default_token_store() == Path.home() / ".config" / "mcp-trio" / "oauth.json"


def test_the_cli_loads_the_oauth_binding_for_oauth_only() -> None:
    code = (
        "import sys, mcp_trio._cli;"
        "print(','.join(m for m in ('mcp_trio._oauth', 'mcp_trio._oauth_loopback',"
        " 'mcp_trio._oauth_store', 'mcp_sansio._oauth', 'webbrowser')"
        " if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"the CLI loaded {out}"

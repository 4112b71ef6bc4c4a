"""DNS-rebinding refusals (421) say how to serve the name, on both sides.

A server bound to every interface but reached by the machine's address refuses the
``Host`` (the default ``allowed_hosts`` are loopback names): the 421 body names the
setting, the server warns once per distinct refused ``Host`` (a bounded number), and
binding every interface with the default hosts says so when it starts. That check stops
browsers, not clients: binding beyond loopback without ``authenticate`` warns so. An
absolute-form target's authority is checked in place of ``Host``.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any, NoReturn

import pytest
import trio

from mcp_sansio.http import HttpServerConfig
from mcp_trio import serve_http
from mcp_trio._util import REFUSED_HOSTS_LOGGED

from .test_http_support import IO_TIMEOUT, App, initialize_body, raw_request, start_server


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "mcp_trio"
        and r.levelno == logging.WARNING
        and "refused Host" in r.getMessage()
    ]


async def test_the_421_body_names_the_setting(nursery: trio.Nursery) -> None:
    server = await start_server(nursery)
    with trio.fail_after(IO_TIMEOUT):
        response = await raw_request(server.port, "POST", host="192.0.2.7", body=initialize_body())
    assert response.status == 421
    message = response.json()["error"]["message"]
    assert message == (
        "Misdirected Request: Host '192.0.2.7' is not served here (allow it in"
        " HttpServerConfig.allowed_hosts, or with mcp-trio run --allow-host NAME)"
    )


async def test_each_refused_host_is_logged_once_up_to_a_bound(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_trio")
    server = await start_server(nursery)
    hosts = [f"10.0.0.{i}:8000" for i in range(REFUSED_HOSTS_LOGGED + 4)]
    with trio.fail_after(IO_TIMEOUT):
        for host in (hosts[0], hosts[0], *hosts[1:], hosts[1]):
            response = await raw_request(server.port, "POST", host=host, body=initialize_body())
            assert response.status == 421
        served = await raw_request(server.port, "POST", host="localhost", body=initialize_body())
    assert served.status == 200
    logged = refusals(caplog)
    assert len(logged) == REFUSED_HOSTS_LOGGED  # the first ones, each once
    for host, message in zip(hosts, logged, strict=False):
        assert f"'{host}'" in message
        assert "HttpServerConfig.allowed_hosts" in message and "--allow-host" in message


async def test_an_absolute_form_target_is_served_and_refused_by_its_authority(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    """RFC 9112 3.2.2: "a server MUST accept the absolute-form in requests", and "MUST
    ignore the received Host header field": the target's authority is checked."""
    caplog.set_level(logging.WARNING, logger="mcp_trio")
    server = await start_server(nursery)
    own = f"127.0.0.1:{server.port}"
    with trio.fail_after(IO_TIMEOUT):
        served = await raw_request(server.port, "POST", f"http://{own}/mcp", body=initialize_body())
        refused = await raw_request(
            server.port, "POST", "http://evil.example/mcp", host=own, body=initialize_body()
        )
    assert served.status == 200 and "mcp-session-id" in served.headers
    assert refused.status == 421
    assert "Host 'evil.example' is not served here" in refused.json()["error"]["message"]
    assert len(logged := refusals(caplog)) == 1 and "'evil.example'" in logged[0]


class _Bound(Exception):
    """Raised instead of binding (tests bind 127.0.0.1 only)."""


async def _no_listeners(*args: Any, **kwargs: Any) -> NoReturn:
    raise _Bound


@pytest.mark.parametrize(
    ("host", "allowed_hosts", "noted"),
    [
        (None, None, True),
        ("0.0.0.0", None, True),
        ("::", None, True),
        ("0.0.0.0", ("mcp.example:*",), False),
        ("127.0.0.1", None, False),
    ],
)
async def test_binding_every_interface_with_loopback_hosts_says_so(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    host: str | None,
    allowed_hosts: tuple[str, ...] | None,
    noted: bool,
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_trio")
    monkeypatch.setattr(trio, "open_tcp_listeners", _no_listeners)
    config = (
        HttpServerConfig()
        if allowed_hosts is None
        else HttpServerConfig(allowed_hosts=allowed_hosts)
    )
    with pytest.raises(_Bound):
        await partial(serve_http, App().handlers, host=host, http_config=config)()
    lines = [r.getMessage() for r in caplog.records if "loopback Host names" in r.getMessage()]
    if noted:
        assert len(lines) == 1
        assert "localhost, 127.0.0.1, [::1]" in lines[0]
        assert "HttpServerConfig.allowed_hosts" in lines[0]
        assert "not access control" in lines[0]  # (what it is not: the warning says why)
    else:
        assert lines == []


async def _allow(head: Any) -> Any:
    raise AssertionError("never called: nothing is served")


@pytest.mark.parametrize(
    ("host", "authenticate", "warned"),
    [
        (None, None, "every interface"),
        ("0.0.0.0", None, "every interface"),
        ("::", None, "every interface"),
        ("192.0.2.7", None, "'192.0.2.7'"),
        ("mcp.example", None, "'mcp.example'"),
        ("0.0.0.0", _allow, None),
        ("127.0.0.1", None, None),
        ("127.0.0.2", None, None),
        ("::1", None, None),
        ("localhost", None, None),
    ],
)
async def test_binding_beyond_loopback_without_authenticate_warns(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    host: str | None,
    authenticate: Any,
    warned: str | None,
) -> None:
    # The security review: the Host check is not access control (the client writes the
    # header), so a server anyone can reach and that asks for no credential says so, as
    # a warning (transports.mdx, "Security Warning": servers SHOULD implement proper
    # authentication for all connections).
    caplog.set_level(logging.WARNING, logger="mcp_trio")
    monkeypatch.setattr(trio, "open_tcp_listeners", _no_listeners)
    with pytest.raises(_Bound):
        await partial(serve_http, App().handlers, host=host, authenticate=authenticate)()
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "no authentication" in r.getMessage()
    ]
    if warned is None:
        assert lines == []
    else:
        assert len(lines) == 1
        assert f"listening on {warned} with no authentication" in lines[0]
        assert "only stops browsers (DNS rebinding); it is not access control" in lines[0]
        assert "authenticate=" in lines[0]

"""``era=`` in the core's configuration objects: a name becomes the value the code
compares with, and a name that is no era is refused at construction. No I/O."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from mcp_sansio import ConnectionConfig, Era
from mcp_sansio.http import HttpClient, HttpClientConfig


@pytest.mark.parametrize(("given", "era"), [("modern", Era.MODERN), ("legacy", Era.LEGACY)])
def test_an_http_client_config_takes_an_era_s_name(given: str, era: Era) -> None:
    config = HttpClientConfig(era=given)
    assert config.era is era  # (an Era, not the str: the client compares with `is`)
    assert config == HttpClientConfig(era=era)
    assert attrs.evolve(HttpClientConfig(), era=given).era is era
    assert HttpClient("http://localhost/mcp", config).era is era
    assert HttpClientConfig().era is None


def test_an_http_client_config_takes_auto_as_not_known() -> None:
    # (as ConnectionConfig spells it: no era known yet, the client probes)
    assert HttpClientConfig(era="auto").era is None
    assert HttpClientConfig(era="auto") == HttpClientConfig()


@pytest.mark.parametrize("bad", ["Auto", "Modern", "", 1])
def test_an_http_client_config_refuses_what_is_no_era(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"era must be None, 'auto' or one of 'legacy', 'modern'"):
        HttpClientConfig(era=bad)


def test_a_connection_config_takes_an_era_or_its_name() -> None:
    for era in ("auto", "legacy", "modern", Era.LEGACY, Era.MODERN):
        assert ConnectionConfig(era=era).era == era  # (mypy: an Era is typed as taken too)


@pytest.mark.parametrize("bad", ["bogus", "Legacy", "", None])
def test_a_connection_config_refuses_what_is_no_era(bad: Any) -> None:
    # It used to be taken, and served as "auto" (both eras).
    with pytest.raises(ValueError, match=r"era must be one of 'auto', 'legacy', 'modern'"):
        ConnectionConfig(era=bad)

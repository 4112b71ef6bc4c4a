"""``Era`` is a ``str`` enum: a value read from a connection can be handed back as a name."""

from __future__ import annotations

import pytest

from mcp_sansio import MODERN_VERSIONS, Connection, ConnectionConfig, Era, unstructure
from mcp_sansio._json import dumps


@pytest.mark.parametrize("era", list(Era))
def test_an_era_is_its_name(era: Era) -> None:
    assert era == era.value and str(era) == era.value and f"{era}" == era.value
    assert Era(era.value) is era and Era(era) is era
    assert hash(era) == hash(era.value)
    # It encodes as its name, through the one JSON entry point and the converter.
    assert dumps({"era": era}) == b'{"era":"%s"}' % era.value.encode()
    assert unstructure(era) == era.value


def test_a_connection_config_takes_an_era_for_its_name() -> None:
    # ConnectionConfig.era compares by name: Era.LEGACY pins the legacy era, which
    # leaves no version of a modern-only list.
    config = ConnectionConfig(era=Era.LEGACY, supported_versions=MODERN_VERSIONS)
    with pytest.raises(ValueError, match="no supported version is left"):
        Connection("client", config)

"""Every attribute of a connection is a slot (``_ConnectionBase.__slots__``).

The hot paths read and write a connection's attributes on every message; a slot is
faster than an instance-dict entry, which a class with this many attributes would
otherwise use. These tests notice an attribute added without its slot (it would land
in ``__dict__`` and the hot path would slow down unseen), and pin that a connection
still takes other attributes and weak references, as before the slots.
"""

from __future__ import annotations

import re
import weakref
from pathlib import Path
from typing import Literal

import pytest

import mcp_sansio
from mcp_sansio import Connection, RequestReceived, ResultReceived
from mcp_sansio._conn_base import _ConnectionBase

from .helpers import handshaken

_SOURCES = ["_conn_base", "_conn_handshake", "_conn_receive", "_conn_answer", "_connection"]


def test_every_attribute_the_connection_sets_is_a_slot() -> None:
    # (Static: also the attributes set only on rare paths.)
    slots = set(_ConnectionBase.__slots__)
    package = Path(mcp_sansio.__file__).parent
    for name in _SOURCES:
        text = (package / f"{name}.py").read_text(encoding="utf-8")
        for attr in re.findall(r"\bself\.(\w+)\s*(?::[^=\n]+)?=[^=]", text):
            assert attr in slots, f"{name}.py sets self.{attr}, which is not a slot"


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_no_attribute_lands_in_the_instance_dict(era: Literal["legacy", "modern"]) -> None:
    assert vars(Connection("client")) == {} and vars(Connection("server")) == {}
    pair = handshaken(era)
    rid = pair.client.send_request("tools/list", None, now=0.0)
    (request,) = pair.deliver(pair.client)
    assert isinstance(request, RequestReceived)
    pair.server.send_result(request.request_id, {"tools": []})
    (answer,) = pair.deliver(pair.server)
    assert isinstance(answer, ResultReceived) and answer.request_id == rid
    assert vars(pair.client) == {} and vars(pair.server) == {}


def test_a_connection_still_takes_other_attributes_and_weak_references() -> None:
    conn = Connection("client")
    conn.tag = "mine"  # type: ignore[attr-defined]
    assert vars(conn) == {"tag": "mine"}
    ref = weakref.ref(conn)
    assert ref() is conn

"""The events the fast path builds from a blank are the events ``__init__`` builds.

``Connection.receive_message`` makes a RequestReceived or ResultReceived by filling an
instance of a private mutable class with the same slots and then assigning ``__class__``
(``mcp_sansio._events`` explains why). These tests pin what that relies on: the blank has
the event's slots (and Python accepts the assignment), the event has nothing ``__init__``
would compute (defaults from factories, validators, converters, ``__attrs_post_init__``, a
cached hash), and the result is indistinguishable from ``__init__``'s, field by field.
"""

from __future__ import annotations

import copy
import pickle
import weakref
from typing import Any

import attrs
import pytest

from mcp_sansio import Era, RequestReceived, ResultReceived
from mcp_sansio._conn_records import _Outbound
from mcp_sansio._events import (
    _REQUEST_RECEIVED_BLANK,
    _RESULT_RECEIVED_BLANK,
    _new,
    _Weakrefable,
)

BLANKS: list[tuple[type, Any]] = [
    (RequestReceived, _REQUEST_RECEIVED_BLANK),
    (ResultReceived, _RESULT_RECEIVED_BLANK),
]

# Keyword arguments for each event: only the fields without defaults ...
REQUIRED: dict[type, dict[str, Any]] = {
    RequestReceived: {
        "request_id": 7,
        "method": "tools/call",
        "params": {"name": "x"},
        "era": Era.LEGACY,
        "protocol_version": "2025-06-18",
    },
    ResultReceived: {"request_id": "r", "method": "tools/call", "result": {"content": []}},
}
# ... and every field, none at its default.
EVERY: dict[type, dict[str, Any]] = {
    RequestReceived: {
        "request_id": "q",
        "method": "prompts/get",
        "params": None,
        "era": Era.MODERN,
        "protocol_version": "2026-07-28",
        "progress_token": 3,
        "client_capabilities": {"sampling": {}},
        "input_responses": {"k": {"action": "accept"}},
        "request_state": "sealed",
    },
    ResultReceived: REQUIRED[ResultReceived],
}


def from_blank(cls: type, blank: Any, values: dict[str, Any]) -> Any:
    """What the fast path does: fill a blank, field by field (defaults included)."""
    event = _new(blank)
    for field in attrs.fields(cls):
        value = values.get(field.name, field.default)
        setattr(event, field.name, value)
    event.__class__ = cls
    return event


@pytest.mark.parametrize(("cls", "blank"), BLANKS)
def test_blank_has_exactly_the_event_slots(cls: type, blank: Any) -> None:
    names = tuple(field.name for field in attrs.fields(cls))
    # One slot per field and nothing else: no cached hash, no second weakref slot.
    assert cls.__dict__["__slots__"] == names
    assert blank.__slots__ == names
    assert cls.__bases__ == blank.__bases__ == (_Weakrefable,)
    assert cls.__basicsize__ == blank.__basicsize__
    assert cls.__weakrefoffset__ == blank.__weakrefoffset__ != 0


@pytest.mark.parametrize("cls", [RequestReceived, ResultReceived])
def test_init_computes_nothing_a_blank_would_miss(cls: type) -> None:
    assert not hasattr(cls, "__attrs_post_init__")
    assert not hasattr(cls, "__attrs_pre_init__")
    for field in attrs.fields(cls):
        assert field.validator is None, field.name
        assert field.converter is None, field.name
        assert not isinstance(field.default, attrs.Factory), field.name  # type: ignore[arg-type]
        assert field.init, field.name
        assert field.on_setattr in (None, attrs.setters.NO_OP), field.name


@pytest.mark.parametrize(("cls", "blank"), BLANKS)
@pytest.mark.parametrize("values", [REQUIRED, EVERY], ids=["defaults", "every-field"])
def test_blank_made_event_is_init_made_event(
    cls: Any, blank: Any, values: dict[type, dict[str, Any]]
) -> None:
    made = from_blank(cls, blank, values[cls])
    init = cls(**values[cls])
    assert type(made) is cls
    for field in attrs.fields(cls):
        assert getattr(made, field.name) is getattr(init, field.name), field.name
    assert made == init
    assert (made != init) is False
    assert repr(made) == repr(init)
    assert attrs.asdict(made, recurse=False) == attrs.asdict(init, recurse=False)
    assert attrs.evolve(made, method="other") == attrs.evolve(init, method="other")
    assert pickle.loads(pickle.dumps(made)) == init
    assert copy.copy(made) == init
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.method = "x"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del made.method
    ref = weakref.ref(made)
    assert ref() is made


def test_blank_made_event_hashes_as_init_made_event() -> None:
    values = {**REQUIRED[RequestReceived], "params": None}
    made = from_blank(RequestReceived, _REQUEST_RECEIVED_BLANK, values)
    init = RequestReceived(**values)
    assert hash(made) == hash(init)
    assert {made: 1}[init] == 1


@pytest.mark.parametrize("cls", [_REQUEST_RECEIVED_BLANK, _RESULT_RECEIVED_BLANK, _Outbound])
def test_hot_path_records_are_made_by_calling_their_class(cls: Any) -> None:
    # The fast paths write ``cls()`` (cheaper than ``object.__new__(cls)``): the same
    # empty instance only while the class keeps object's __new__ and __init__.
    assert cls.__new__ is object.__new__
    assert cls.__init__ is object.__init__
    made = cls()
    assert type(made) is cls
    assert all(not hasattr(made, name) for name in cls.__slots__ if name != "__dict__")
    assert getattr(made, "__dict__", {}) == {}

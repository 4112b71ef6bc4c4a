"""A caller's mistake on the sending side raises ``LocalProtocolError`` and changes nothing,
in both eras, instead of going on the wire or raising some other error: no I/O.

* ``send_result`` with a result that is no object: the schema's ``Result`` is an object
  (``JSONRPCResultResponse.result``), in every revision; the modern era refused it, the
  legacy era wrote ``"result":null``.
* ``send_progress`` with a progress or total that is no number, or a message that is no
  string (``ProgressNotificationParams``).
* ``send_notification`` with a request's method (``tools/call``), or params that are no
  object.
"""

from __future__ import annotations

from collections import ChainMap
from types import MappingProxyType
from typing import Any, Literal

import pytest

from mcp_sansio import (
    LocalProtocolError,
    RequestReceived,
    ResultReceived,
)

from .helpers import ConnectionPair, handshaken

ERAS: list[Literal["legacy", "modern"]] = ["legacy", "modern"]


def served(era: Literal["legacy", "modern"]) -> tuple[ConnectionPair, RequestReceived]:
    """A pair of the era whose server holds a tools/call that asked for progress."""
    pair = handshaken(era)
    pair.client.send_request("tools/call", {"name": "t"}, now=0.0, progress=True)
    (request,) = pair.deliver(pair.client)
    assert isinstance(request, RequestReceived) and request.progress_token is not None
    return pair, request


def still_answerable(pair: ConnectionPair, request: RequestReceived) -> None:
    """Nothing went out, and the request can still be answered."""
    assert pair.server.data_to_send() == []
    pair.server.send_result(request.request_id, {"content": []})
    (answer,) = pair.deliver(pair.server)
    assert isinstance(answer, ResultReceived)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("result", [None, [1, 2], "x", 3, True])
def test_a_result_that_is_no_object_is_refused(
    era: Literal["legacy", "modern"], result: Any
) -> None:
    pair, request = served(era)
    with pytest.raises(LocalProtocolError, match="result must be a mapping"):
        pair.server.send_result(request.request_id, result)
    still_answerable(pair, request)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("1",), "progress and total are numbers"),
        ((True,), "progress and total are numbers"),
        ((None,), "progress and total are numbers"),
        ((1, "2"), "progress and total are numbers"),
        ((1, False), "progress and total are numbers"),
        ((1, None, 5), "a progress message is a string"),
        ((1, 2, b"half"), "a progress message is a string"),
    ],
)
def test_progress_of_the_wrong_type_is_refused(
    era: Literal["legacy", "modern"], args: tuple[Any, ...], match: str
) -> None:
    pair, request = served(era)
    with pytest.raises(LocalProtocolError, match=match):
        pair.server.send_progress(request.request_id, *args)
    # No state changed: the same progress goes out once given right.
    assert pair.server.send_progress(request.request_id, 1, 2, "half")
    (note,) = pair.server.data_to_send()
    assert b'"progress":1' in note
    still_answerable(pair, request)


@pytest.mark.parametrize("era", ERAS)
def test_progress_of_the_right_types_goes_out(era: Literal["legacy", "modern"]) -> None:
    pair, request = served(era)
    assert pair.server.send_progress(request.request_id, 1)
    assert pair.server.send_progress(request.request_id, 1.5, 3.0, "half")
    assert len(pair.server.data_to_send()) == 2


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("method", ["tools/call", "ping", "initialize", "sampling/createMessage"])
def test_a_request_method_is_no_notification(era: Literal["legacy", "modern"], method: str) -> None:
    pair, request = served(era)
    for sender in (pair.server, pair.client):
        with pytest.raises(LocalProtocolError, match=f"'{method}' is a request"):
            sender.send_notification(method, {})
        assert sender.data_to_send() == []
    still_answerable(pair, request)


@pytest.mark.parametrize("params", [[1], "x", 5])
def test_notification_params_are_an_object(params: Any) -> None:
    pair, _ = served("legacy")
    with pytest.raises(LocalProtocolError, match="params are an object"):
        pair.client.send_notification("notifications/custom", params)
    assert pair.client.data_to_send() == []
    pair.client.send_notification("notifications/custom", {"x": 1})
    pair.client.send_notification("notifications/custom")
    assert len(pair.client.data_to_send()) == 2


@pytest.mark.parametrize("era", ERAS)
def test_a_mapping_that_is_no_dict_goes_out_as_an_object(era: Literal["legacy", "modern"]) -> None:
    # The checks say "a mapping": MappingProxyType and ChainMap are mappings orjson does not
    # write (it raised TypeError in the legacy era, and for a notification's params in both).
    pair, request = served(era)
    pair.server.send_result(request.request_id, MappingProxyType({"content": []}))  # type: ignore[arg-type]
    (answer,) = pair.deliver(pair.server)
    assert isinstance(answer, ResultReceived) and answer.result["content"] == []
    pair.client.send_notification("notifications/custom", ChainMap({"x": 1}))  # type: ignore[arg-type]
    (sent,) = pair.client.data_to_send()
    assert b'"params":{"x":1}' in sent

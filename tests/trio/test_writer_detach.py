"""A caller whose own request is stuck half-written leaves at its deadline.

Each message write on a byte stream or a WebSocket is shielded (half a frame would
corrupt the stream) and bounded by ``write_timeout``. Written in the caller's own task,
that shield held the caller too: a request of 100 KB to a peer that stopped reading
after its first bytes ignored the caller's ``timeout=`` and cancel scopes until
``write_timeout`` (30 s). The request's write is now detached (``_writer``: "Detached
writes"): the caller returns at its deadline, a task of the session's finishes the
write (the peer gets the whole line, then the ``notifications/cancelled``), or
``write_timeout`` ends the session as before.

The peer is the far end of a lockstep stream (``send_all`` returns only once the peer
has read it all), on the ``autojump_clock``: a caller held until ``write_timeout``
shows as a 30 s wait.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
import trio
import trio.testing

from mcp_sansio._json import loads
from mcp_trio import RequestTimeout, SessionConfig, StreamChannel

from .helpers import RawPeer, handshaken

WRITE_TIMEOUT = 30.0
BIG = "y" * 100_000


async def _read_line(stream: trio.abc.ReceiveStream, buffer: bytearray) -> dict[str, Any]:
    while b"\n" not in buffer:
        chunk = await stream.receive_some()
        assert chunk, "the stream ended"
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    message: dict[str, Any] = loads(line)
    return message


def _by_timeout() -> tuple[dict[str, Any], AbstractContextManager[object]]:
    return {"timeout": 1.0}, trio.CancelScope()


def _by_scope() -> tuple[dict[str, Any], AbstractContextManager[object]]:
    return {}, trio.move_on_after(1.0)


@pytest.mark.parametrize("give_up", [_by_timeout, _by_scope], ids=["timeout", "cancel-scope"])
async def test_a_caller_leaves_at_its_deadline_and_the_write_still_completes(
    give_up: Callable[[], tuple[dict[str, Any], AbstractContextManager[object]]],
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.testing.lockstep_stream_pair()
    channel = StreamChannel.from_stream(ours)
    peer = RawPeer(None, theirs)
    config = SessionConfig(write_timeout=WRITE_TIMEOUT)
    with trio.fail_after(3 * WRITE_TIMEOUT):
        async with handshaken(channel, peer, "client", config=config) as session:
            returned = trio.Event()
            took: list[float] = []
            raised: list[BaseException] = []

            async def call() -> None:
                kwargs, scope = give_up()
                start = trio.current_time()
                with scope:
                    try:
                        await session.request(
                            "tools/call", {"name": "x", "arguments": {"a": BIG}}, **kwargs
                        )
                    except RequestTimeout as exc:
                        raised.append(exc)
                took.append(trio.current_time() - start)
                returned.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                buffer = bytearray(await theirs.receive_some(1000))  # then stop reading
                await returned.wait()
                assert took == [pytest.approx(1.0, abs=0.01)]  # not write_timeout
                # The bytes started are completed: the whole request, then its
                # cancellation (cancellation.mdx: the request was issued).
                request = await _read_line(theirs, buffer)
                assert request["method"] == "tools/call"
                assert request["params"]["arguments"]["a"] == BIG
                cancelled = await _read_line(theirs, buffer)
                assert cancelled["method"] == "notifications/cancelled"
                assert cancelled["params"]["requestId"] == request["id"]
            assert session.close_reason is None  # the session goes on
            if "timeout" in give_up()[0]:
                assert raised


async def test_a_peer_that_never_reads_on_still_ends_the_session_at_write_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ours, theirs = trio.testing.lockstep_stream_pair()
    channel = StreamChannel.from_stream(ours)
    peer = RawPeer(None, theirs)
    config = SessionConfig(write_timeout=WRITE_TIMEOUT)
    with trio.fail_after(3 * WRITE_TIMEOUT):
        async with handshaken(channel, peer, "client", config=config) as session:
            start = trio.current_time()
            with trio.move_on_after(1.0):
                await session.request("tools/call", {"name": "x", "arguments": {"a": BIG}})
            assert trio.current_time() - start == pytest.approx(1.0, abs=0.01)
            await session.wait_closed()
            assert trio.current_time() - start == pytest.approx(WRITE_TIMEOUT, abs=0.01)
            reason = session.close_reason
            assert reason is not None
            assert f"timed out after {WRITE_TIMEOUT} s" in str(reason)

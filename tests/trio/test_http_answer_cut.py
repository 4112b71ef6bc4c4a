"""The answer to a server's request, its connection cut before the server's ``202``.

Legacy Streamable HTTP: the client answers ``sampling/createMessage`` with a one-way
POST. A proxy between a real :class:`~mcp_trio.Server` and the client forwards that
POST whole, waits for the server's ``202`` and drops it, closing the client's
connection (a connection cut at that moment, as the soak's cutting proxy did). The
client cannot know whether the server had the answer: it sends it once more, on
another connection; the server, which had it, ignores the second copy (an answer to a
request no longer pending) without a word the client would see, and the ``tools/call``
is answered. It used to hang: when the proxy drops the answer instead, the server's
``ctx.sample`` waits for ever (no bound of its own). Real sockets on 127.0.0.1.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import pytest
import trio

import mcp_trio
from mcp_trio import Context, Server

from .test_http_support import IO_TIMEOUT


def _sampling_server() -> Server:
    server = Server("cut", "1.0")

    @server.tool()
    async def sample(ctx: Context) -> str:
        """Asks the client for a completion."""
        result = await ctx.sample("hello", max_tokens=5)
        return str(getattr(result, "model", "?"))

    return server


async def _on_sampling(params: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}


class _CuttingProxy:
    """Forwards every connection to ``target``; the first ``cuts`` connections that
    carry the sampling answer are cut: the answer is forwarded (``forward``) or
    dropped, and the server's answer to it never reaches the client."""

    def __init__(self, target: int, *, cuts: int, forward: bool) -> None:
        self.target = target
        self.cuts = cuts
        self.forward = forward
        self.answers = 0
        """POSTs of the sampling answer the client made."""
        self.port = 0

    async def start(self, nursery: trio.Nursery) -> None:
        listeners = await nursery.start(partial(trio.serve_tcp, self._handle, 0, host="127.0.0.1"))
        self.port = listeners[0].socket.getsockname()[1]

    async def _handle(self, client: trio.SocketStream) -> None:
        server = await trio.open_tcp_stream("127.0.0.1", self.target)
        cut = trio.Event()  # (set: nothing more goes back to the client)
        try:
            async with trio.open_nursery() as nursery:

                async def up() -> None:
                    while data := await client.receive_some(65536):
                        if b'"model"' in data and b'"result"' in data:
                            self.answers += 1
                            if self.cuts:
                                self.cuts -= 1
                                cut.set()
                                if self.forward:
                                    await server.send_all(data)
                                    return  # (down() reads the 202, then cuts)
                                nursery.cancel_scope.cancel()
                                return
                        await server.send_all(data)

                async def down() -> None:
                    while data := await server.receive_some(65536):
                        if cut.is_set():  # (the 202 to the answer: dropped)
                            nursery.cancel_scope.cancel()
                            return
                        await client.send_all(data)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(up)
                nursery.start_soon(down)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(server)
            await trio.aclose_forcefully(client)


@pytest.mark.parametrize(
    ("cuts", "forward"),
    [(1, True), (1, False)],
    ids=["the server had it", "the server never had it"],
)
async def test_an_answer_cut_before_its_202_is_sent_again_and_the_call_answered(
    nursery: trio.Nursery, caplog: pytest.LogCaptureFixture, cuts: int, forward: bool
) -> None:
    caplog.set_level(logging.WARNING)
    handle = await nursery.start(partial(_sampling_server().serve_http, "127.0.0.1", 0))
    proxy = _CuttingProxy(handle.port, cuts=cuts, forward=forward)
    await proxy.start(nursery)
    with trio.fail_after(IO_TIMEOUT):
        async with mcp_trio.open_client(
            f"http://127.0.0.1:{proxy.port}/mcp",
            era="legacy",
            protocol_version="2025-11-25",
            on_sampling=_on_sampling,
        ) as client:
            assert (await client.call_tool("sample", {})).text == "m"
            assert (await client.call_tool("sample", {})).text == "m"  # (the session goes on)
    assert proxy.answers == 3  # the first twice, the second once
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []

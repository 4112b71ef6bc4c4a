"""``log`` says whether its own message went out over a channel with a send bound (a
WebSocket's), however other tasks' messages fare meanwhile: a message over the bound is
dropped (``Session._fit``), one within it is sent, even when its write waits behind the
channel while another task's message is dropped."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from mcp_trio import Handlers
from mcp_trio._channel import MemoryChannel
from mcp_trio._open import open_session

from .helpers import client_config, server_config


class _Gated(MemoryChannel):  # type: ignore[misc]  # (final: a test double only)
    """A memory channel with a send bound whose writes wait until ``gate`` is set."""

    gate: trio.Event | None = None

    def send_bound(self) -> tuple[int, str]:
        return (300, "ws_max_message_size")

    def send_nowait(self, message: bytes) -> bool:
        if self.gate is not None and not self.gate.is_set():
            return False
        return super().send_nowait(message)

    async def send(self, message: bytes) -> None:
        if self.gate is not None:
            await self.gate.wait()
        await super().send(message)


async def test_a_log_message_sent_while_another_is_dropped_says_it_was_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    a_send, b_recv = trio.open_memory_channel[bytes](256)
    b_send, a_recv = trio.open_memory_channel[bytes](256)
    server_side, client_side = _Gated(a_send, a_recv), MemoryChannel(b_send, b_recv)
    server_side._peer, client_side._peer = client_side, server_side
    got: list[Any] = []
    handlers = Handlers()

    @handlers.on_notification("notifications/message")
    async def on_log(ctx: Any) -> None:
        got.append(ctx.params["data"])

    out: dict[str, bool] = {}
    async with (
        open_session(server_side, "server", connection_config=server_config()) as server,
        open_session(
            client_side, "client", handlers=handlers, connection_config=client_config()
        ) as client,
    ):
        await client.start()
        await server.until_initialized()
        server_side.gate = trio.Event()

        async def log(name: str, data: str) -> None:
            out[name] = await server.log("info", data)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(log, "small", "small")  # waits behind the gate...
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(log, "big", "x" * 1000)  # ... while this one is dropped
            await trio.testing.wait_all_tasks_blocked()
            server_side.gate.set()
        with trio.fail_after(5):
            while not got:
                await trio.sleep(0.01)
    assert out == {"small": True, "big": False}
    assert got == ["small"]

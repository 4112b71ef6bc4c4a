"""What the handles of :func:`~mcp_trio.serve_http` and :func:`~mcp_trio.serve_websocket`
share: where the server listens."""

from __future__ import annotations

import abc

import trio

from ._util import url_host

__all__ = ["ListeningHandle"]


class ListeningHandle(abc.ABC):
    """A running server's listeners, and the ``port`` and URL of the first one."""

    _returned: trio.Event | None = None
    """Set when the ``Server.serve_*`` method that started this handle has returned
    (its lifespan exited); ``None`` for a transport's own function, which has no
    more to wait for than it does itself (see :meth:`_wait_returned`)."""

    @property
    @abc.abstractmethod
    def listeners(self) -> list[trio.SocketListener]:
        """The listening sockets."""

    @property
    def port(self) -> int:
        """The port of the first listener (the one the kernel chose for ``port=0``)."""
        return int(self.listeners[0].socket.getsockname()[1])

    def _url(self, scheme: str, path: str) -> str:
        """``scheme://host:port/path`` of the first listener (an IPv6 host in brackets)."""
        host = url_host(self.listeners[0].socket.getsockname()[0])
        return f"{scheme}://{host}:{self.port}{path}"

    def _returns_with(self, returned: trio.Event) -> None:
        """Make ``aclose()`` wait for ``returned`` too: a ``Server.serve_*`` method
        started this handle, and returns after the transport's function did (once it
        has left the server's lifespan)."""
        self._returned = returned

    async def _wait_returned(self) -> None:
        """The end of ``aclose()``: wait until whoever started this handle returned."""
        if self._returned is not None:
            await self._returned.wait()

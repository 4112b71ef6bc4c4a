"""What the handles of :func:`~mcp_trio.serve_http` and :func:`~mcp_trio.serve_websocket`
share: where the server listens."""

from __future__ import annotations

import abc

import trio

from ._util import url_host

__all__ = ["ListeningHandle"]


class ListeningHandle(abc.ABC):
    """A running server's listeners, and the ``port`` and URL of the first one."""

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

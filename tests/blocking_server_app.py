"""Servers for the blocking client's tests; run with ``python -m tests.blocking_server_app``
from the repository root (``tests/`` itself must not be on ``sys.path``: it holds a
``trio`` package of tests).

Modes:

* ``stdio`` (default): the client tests' server (``tests/trio/client_server_app.py``) on
  stdio, plus a ``crash`` tool that exits with status 3;
* ``tcp``: the same over TCP, newline-delimited JSON, on 127.0.0.1; prints the port;
* ``sansio``: a modern-only server written with plain ``mcp_sansio`` and blocking reads
  (no trio): its ``tools/call`` asks the client for its name (MRTR) before answering;
* ``rogue``: both eras, one tool ``typed`` whose ``tools/call`` result is its arguments
  (so a test sends the result it wants back) and whose ``outputSchema`` requires an
  integer ``n``; calling ``change`` (arguments: ``type``, ``lists``) makes ``n`` of that
  type from the next ``tools/list`` on without a word, or (``lists``: ``"fail"``,
  ``"hang"``) every later listing fail or never end. Each tool's description counts the
  listings (``listing 3``). A ``typed`` call with ``"listChanged": true`` sends
  ``notifications/tools/list_changed`` before its result (legacy);
* ``http``: the client tests' server (with ``crash``) over Streamable HTTP, both eras, on
  127.0.0.1; arguments: the port (``0``: any), a bearer token the server requires (``-``:
  none), and a certificate and key file for https (or none); prints the port. Its
  ``broadcast`` tool sends ``notifications/resources/list_changed`` to every legacy
  session's GET stream;
* ``deaf``: answers ``server/discover``, then never reads again (a full pipe);
* ``mute``: reads and never answers (a handshake that times out).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any


def handlers_with_crash() -> Any:
    from tests.trio.client_server_app import make_handlers  # noqa: PLC0415 - imports trio

    handlers = make_handlers()
    inner = handlers.request_handler("tools/call")
    assert inner is not None

    async def call(ctx: Any) -> Any:
        if ctx.params["name"] == "crash":
            sys.stderr.write("crashing on purpose\n")
            os._exit(3)
        return await inner(ctx)

    handlers.set_request_handler("tools/call", call)
    return handlers


def serve_stdio() -> None:
    import trio  # noqa: PLC0415 - only the trio modes need it

    from mcp_trio import serve_stdio as serve  # noqa: PLC0415
    from tests.trio.client_server_app import server_config  # noqa: PLC0415

    trio.run(lambda: serve(handlers_with_crash(), connection_config=server_config()))


def serve_tcp() -> None:
    import trio  # noqa: PLC0415

    from mcp_trio import StreamChannel, open_session  # noqa: PLC0415
    from tests.trio.client_server_app import server_config  # noqa: PLC0415

    async def one(stream: trio.SocketStream) -> None:
        channel = StreamChannel.from_stream(stream)
        async with open_session(
            channel, "server", handlers=handlers_with_crash(), connection_config=server_config()
        ) as session:
            await session.wait_closed()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            serve = functools.partial(trio.serve_tcp, host="127.0.0.1")
            listeners = await nursery.start(serve, one, 0)
            print(listeners[0].socket.getsockname()[1], flush=True)

    trio.run(main)


def serve_http_mode() -> None:
    import trio  # noqa: PLC0415

    from mcp_trio import BearerAuth, Principal, serve_http  # noqa: PLC0415
    from tests.trio.client_server_app import server_config  # noqa: PLC0415

    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    token = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
    context = None
    if len(sys.argv) > 5:
        import ssl  # noqa: PLC0415

        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(sys.argv[4], sys.argv[5])

    async def verify(given: str) -> Principal | None:
        return Principal(subject="tester") if given == token else None

    auth = BearerAuth(verify_token=verify) if token is not None else None
    handlers = handlers_with_crash()
    inner = handlers.request_handler("tools/call")
    assert inner is not None
    served: list[Any] = []

    async def call(ctx: Any) -> Any:
        if ctx.params["name"] == "broadcast":  # to every legacy session's GET stream
            served[0].send_notification("notifications/resources/list_changed")
            return {"content": []}
        return await inner(ctx)

    handlers.set_request_handler("tools/call", call)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            handle = await nursery.start(
                functools.partial(
                    serve_http,
                    handlers,
                    connection_config=server_config(),
                    port=port,
                    ssl_context=context,
                    authenticate=auth,
                )
            )
            served.append(handle)
            print(handle.port, flush=True)

    trio.run(main)


def serve_sansio() -> None:
    """A modern server from the core alone: blocking reads of stdin, writes to stdout."""
    from mcp_sansio import Connection, ConnectionConfig, RequestReceived  # noqa: PLC0415

    conn = Connection(
        "server",
        ConnectionConfig(
            era="modern",
            capabilities={"tools": {}},
            implementation={"name": "sansio-server", "version": "1"},
        ),
    )
    ask = {
        "name": {
            "method": "elicitation/create",
            "params": {
                "message": "Your name?",
                "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}},
            },
        }
    }
    while data := os.read(0, 65_536):
        for event in conn.receive_bytes(data, now=0.0):
            if not isinstance(event, RequestReceived):
                continue
            if event.method == "tools/list":
                tool = {"name": "greet", "inputSchema": {"type": "object"}}
                conn.send_result(event.request_id, {"tools": [tool]})
            elif event.input_responses is None:
                conn.send_input_required(event.request_id, ask, state="asked", now=0.0)
            else:
                name = event.input_responses["name"]["content"]["n"]
                text = f"hello {name} ({event.request_state})"
                conn.send_result(event.request_id, {"content": [{"type": "text", "text": text}]})
        os.write(1, conn.bytes_to_send())


def serve_rogue() -> None:
    """A server that breaks its tools' ``outputSchema`` on demand (see the module doc)."""
    import trio  # noqa: PLC0415

    from mcp_sansio import ConnectionConfig  # noqa: PLC0415
    from mcp_trio import Handlers, McpError, RequestContext, serve_stdio  # noqa: PLC0415

    handlers = Handlers()
    state: dict[str, Any] = {"listed": 0, "type": "integer", "lists": "ok"}

    @handlers.on_request("tools/list")
    async def tools_list(ctx: RequestContext) -> dict[str, Any]:
        state["listed"] += 1
        if state["lists"] == "fail":
            raise McpError.from_code(-32603, "cannot list now")
        if state["lists"] == "hang":
            await trio.sleep_forever()
        schema = {
            "type": "object",
            "properties": {"n": {"type": state["type"]}},
            "required": ["n"],
        }
        description = f"listing {state['listed']}"
        tools: list[dict[str, Any]] = [
            {"name": name, "description": description, "inputSchema": {"type": "object"}}
            for name in ("typed", "change")
        ]
        tools[0]["outputSchema"] = schema
        return {"tools": tools}

    @handlers.on_request("tools/call")
    async def tools_call(ctx: RequestContext) -> dict[str, Any]:
        assert ctx.params is not None
        arguments = dict(ctx.params.get("arguments") or {})
        if ctx.params["name"] == "change":
            state.update(arguments)
            return {"content": []}
        if arguments.pop("listChanged", False):
            await ctx.session.notify("notifications/tools/list_changed")
        return {"content": [], **arguments}

    config = ConnectionConfig(capabilities={"tools": {"listChanged": True}})
    trio.run(lambda: serve_stdio(handlers, connection_config=config))


def deaf() -> None:
    """Answers the first message (``server/discover``), then never reads again."""
    import time  # noqa: PLC0415

    from mcp_sansio import Connection, ConnectionConfig  # noqa: PLC0415

    conn = Connection("server", ConnectionConfig(era="modern", capabilities={"tools": {}}))
    conn.receive_bytes(os.read(0, 65_536), now=0.0)
    os.write(1, conn.bytes_to_send())
    time.sleep(60)


def mute() -> None:
    while os.read(0, 65_536):
        pass


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    modes = {"stdio": serve_stdio, "tcp": serve_tcp, "sansio": serve_sansio, "deaf": deaf}
    modes.update(mute=mute, rogue=serve_rogue, http=serve_http_mode)
    modes[mode]()

"""A notes server: tools, resources, a prompt and completions, in both protocol eras.

Run it::

    mcp-trio run examples/notes_server.py                      # stdio
    mcp-trio run examples/notes_server.py --transport http     # http://127.0.0.1:8000/mcp
    mcp-trio list examples/notes_server.py
    mcp-trio call examples/notes_server.py search_notes --arg query=trio

or without the command: ``python examples/notes_server.py`` (stdio).

The code lives in the package (``mcp_trio/_cli_notes.py``) so that ``mcp-trio demo``
can serve it from an installed wheel, where this directory does not exist; read it
there. It uses only the public API: ``Server``, ``Context``, ``ToolError``,
``ResourceNotFound``, ``Message``, ``EmbeddedResource``, ``CompletionRequest``.
"""

from __future__ import annotations

import trio

from mcp_trio._cli_notes import Note, NoteStore, SearchResults, create_server

__all__ = ["Note", "NoteStore", "SearchResults", "create_server", "server"]

server = create_server()
"""The server ``mcp-trio run examples/notes_server.py`` serves (a fresh store of notes)."""

if __name__ == "__main__":
    trio.run(server.serve_stdio)

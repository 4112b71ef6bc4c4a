"""The notes server of ``mcp-trio demo``, under a public name.

``examples/notes_server.py`` serves the same code, but an installed wheel has no
``examples/``: ``mcp-trio demo`` then tells its users to run
``mcp-trio run mcp_trio.demo:create_server``, which this module makes a stable path to
(the code lives in a private module of the command line).
"""

from __future__ import annotations

from ._cli_notes import create_server

__all__ = ["create_server"]

"""The ``mcp-trio`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mcp-trio`` and ``python -m mcp_trio``."""
    parser = argparse.ArgumentParser(
        prog="mcp-trio", description="Model Context Protocol on Trio (dual-era)."
    )
    parser.add_argument("--version", action="version", version=f"mcp-trio {__version__}")
    parser.parse_args(argv)
    parser.print_help(sys.stderr)
    return 0

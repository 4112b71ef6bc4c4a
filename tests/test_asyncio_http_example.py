"""``examples/asyncio_http_client.py``: the core driven by hand from asyncio over
Streamable HTTP, run as a real process against the Trio notes server, in both eras."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

from mcp_trio import Context
from mcp_trio._cli_notes import NoteStore, create_server

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "asyncio_http_client.py"
IO_TIMEOUT = 60  # seconds, absolute: a real process on a shared machine


@pytest.mark.parametrize(
    ("era", "connected"),
    [
        ("legacy", "connected: legacy era, protocol 2025-11-25, server notes"),
        ("modern", "connected: modern era, protocol 2026-07-28, server notes"),
        ("auto", "connected: modern era, protocol 2026-07-28, server notes"),
    ],
    ids=["legacy", "modern", "auto"],
)
async def test_the_asyncio_http_example_runs_against_the_trio_server(
    nursery: trio.Nursery, era: str, connected: str
) -> None:
    store = NoteStore()
    server = create_server(store)
    # summarize_notes made to work until it is cancelled, to see that the cancellation
    # reached the server, and when: the example deletes its note only after it.
    server.remove_tool("summarize_notes")
    note_there_when_cancelled: list[bool] = []

    @server.tool()
    async def summarize_notes(ctx: Context) -> str:
        """Summarize the notes (until cancelled)."""
        await ctx.report_progress(0, 4, "reading 'Structured concurrency'")
        try:
            await trio.sleep_forever()
        finally:
            note_there_when_cancelled.append(store.get(5) is not None)
        raise AssertionError("unreachable")

    handle = await nursery.start(server.serve_http, "127.0.0.1", 0)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with trio.fail_after(IO_TIMEOUT):
        done = await trio.run_process(
            [sys.executable, str(EXAMPLE), handle.url, era],
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == [
        connected,
        "tools: add_note, delete_note, search_notes, summarize_notes",
        "add_note: #5",
        "progress: 0/4 reading 'Structured concurrency'",
        "summarize_notes: cancelled",
        "question: Delete note 5, 'Lemons'?",  # (legacy: a request; modern: input_required)
        "delete_note: Deleted note 5, 'Lemons'.",
    ]
    assert note_there_when_cancelled == [True]  # (not at the end: by the cancellation)
    assert store.get(5) is None
    await handle.aclose()

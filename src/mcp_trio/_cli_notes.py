"""A small notes server: the example behind ``mcp-trio demo`` and ``examples/notes_server.py``.

It is written the way an application would be (public ``mcp_trio`` names only) and
lives inside the package so that ``mcp-trio demo`` works from an installed wheel, where
``examples/`` does not exist. ``examples/notes_server.py`` serves this same code.

What it shows:

* tools with typed arguments and structured output (``add_note``, ``search_notes``),
  progress and logging (``summarize_notes``), and a confirmation asked of the user with
  elicitation (``delete_note``: a request to the client in the legacy era, an
  ``input_required`` round trip in the modern era -- the same code);
* a static resource (``notes://index``) and a resource template (``notes://note/{id}``)
  whose readers are told when a note changes;
* a prompt (``review_note``) that embeds the note;
* completion of note ids for the template variable and the prompt argument.

The notes live in memory: each :func:`create_server` call starts from the same few.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Annotated

import attrs
import trio

from mcp_sansio import ErrorCode
from mcp_trio import (
    CompletionRequest,
    Constraints,
    Context,
    Description,
    EmbeddedResource,
    McpError,
    Message,
    ResourceNotFound,
    Server,
    ToolError,
)

__all__ = ["SEED_NOTES", "Note", "NoteStore", "SearchHit", "SearchResults", "create_server"]

INDEX_URI = "notes://index"
NOTE_TEMPLATE = "notes://note/{id}"
STEP_DELAY = 0.1
"""Seconds ``summarize_notes`` spends on each note, so that its progress can be seen."""

SEED_NOTES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Structured concurrency",
        "Every task lives inside a nursery, so no task outlives the block that started it. "
        "Cancellation and errors travel up the tree.",
        ("trio", "python"),
    ),
    (
        "MCP in one paragraph",
        "The Model Context Protocol lets an application offer tools, resources and prompts "
        "to a language model. Servers speak JSON-RPC over stdio or HTTP.",
        ("mcp",),
    ),
    (
        "Groceries",
        "Oat milk, coffee beans, two lemons, rye bread.",
        ("home",),
    ),
    (
        "Sans-IO",
        "Keep the protocol logic free of sockets and clocks: bytes in, events out. "
        "Then one core serves trio, asyncio and blocking code alike.",
        ("python", "mcp"),
    ),
)
"""The notes a new store starts with: (title, body, tags)."""


@attrs.frozen(kw_only=True)
class Note:
    """A note."""

    id: int
    """Its number, as in notes://note/{id}."""
    title: str
    """A short title."""
    body: str
    """The text of the note."""
    tags: tuple[str, ...] = ()
    """Lower-case labels."""

    @property
    def uri(self) -> str:
        """The note's resource URI."""
        return f"notes://note/{self.id}"

    def markdown(self) -> str:
        """The note as Markdown."""
        tags = " ".join(f"#{tag}" for tag in self.tags)
        return f"# {self.title}\n\n{self.body}\n" + (f"\n{tags}\n" if tags else "")


@attrs.frozen(kw_only=True)
class SearchHit:
    """One note that matched a search."""

    id: int
    """The note's number."""
    title: str
    """Its title."""
    tags: tuple[str, ...]
    """Its tags."""
    snippet: str
    """The start of its body."""
    uri: str
    """Where to read all of it."""


@attrs.frozen(kw_only=True)
class SearchResults:
    """What a search found."""

    query: str
    """The query, as given."""
    total: int
    """How many notes matched (more than the hits when the limit cut them)."""
    hits: list[SearchHit]
    """The best matches first."""


@attrs.frozen
class Confirmation:
    """The form delete_note shows the user."""

    delete: bool
    """Delete the note?"""


class NoteStore:
    """The notes, in memory, by id.

    Args:
        seed: (title, body, tags) of the first notes.
    """

    def __init__(self, seed: Iterable[tuple[str, str, Iterable[str]]] = SEED_NOTES) -> None:
        self._notes: dict[int, Note] = {}
        self._ids = itertools.count(1)
        for title, body, tags in seed:
            self.add(title, body, tags)

    def add(self, title: str, body: str, tags: Iterable[str] = ()) -> Note:
        """Store a new note; tags are lower-cased and deduplicated."""
        clean = tuple(dict.fromkeys(tag.strip().lower() for tag in tags if tag.strip()))
        note = Note(id=next(self._ids), title=title.strip(), body=body.strip(), tags=clean)
        self._notes[note.id] = note
        return note

    def get(self, note_id: int) -> Note | None:
        """The note, or ``None``."""
        return self._notes.get(note_id)

    def delete(self, note_id: int) -> None:
        """Forget a note (no error if it is already gone)."""
        self._notes.pop(note_id, None)

    def all(self, tag: str | None = None) -> list[Note]:
        """Every note (with ``tag``, if given), oldest first."""
        wanted = None if tag is None else tag.strip().lower()
        return [n for n in self._notes.values() if wanted is None or wanted in n.tags]

    def search(self, query: str) -> list[Note]:
        """Notes containing every word of ``query`` (title, body or tags), best first."""
        words = query.lower().split()

        def score(note: Note) -> int:
            title, body, tags = note.title.lower(), note.body.lower(), note.tags
            if not all(w in title or w in body or w in tags for w in words):
                return 0
            return sum(3 * (w in title) + 2 * (w in tags) + body.count(w) for w in words)

        scored = [(score(note), note) for note in self._notes.values()]
        return [note for s, note in sorted(scored, key=lambda x: (-x[0], x[1].id)) if s > 0]


def _snippet(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def create_server(store: NoteStore | None = None) -> Server:
    """A notes server over ``store`` (default: a new store with :data:`SEED_NOTES`)."""
    notes = store if store is not None else NoteStore()
    server = Server(
        "notes",
        "1.0",
        title="Notes",
        instructions=(
            "A personal notes store. Search before adding; read notes://note/{id} for a whole note."
        ),
    )

    # ------------------------------------------------------------------ tools

    @server.tool(annotations={"idempotentHint": False})
    async def add_note(
        ctx: Context,
        title: Annotated[str, Constraints(min_length=1, max_length=200)],
        body: str,
        tags: Sequence[str] = (),
    ) -> Note:
        """Add a note.

        Args:
            title: a short title.
            body: the text of the note (Markdown is fine).
            tags: labels to find it by, e.g. ["work", "ideas"].
        """
        note = notes.add(title, body, tags)
        await ctx.info(f"added note {note.id}: {note.title}")
        await server.notify_resource_updated(INDEX_URI)
        return note

    @server.tool(annotations={"readOnlyHint": True})
    async def search_notes(
        query: Annotated[str, Description("Words to look for, e.g. 'trio nursery'")],
        limit: Annotated[int, Constraints(minimum=1, maximum=50)] = 10,
    ) -> SearchResults:
        """Search the notes by title, text and tags; every word must match."""
        found = notes.search(query)
        hits = [
            SearchHit(id=n.id, title=n.title, tags=n.tags, snippet=_snippet(n.body), uri=n.uri)
            for n in found[:limit]
        ]
        return SearchResults(query=query, total=len(found), hits=hits)

    @server.tool(annotations={"readOnlyHint": True}, output_schema=False)
    async def summarize_notes(ctx: Context, tag: str | None = None) -> str:
        """Summarize the notes (those with a tag, if given), one line each.

        Reports progress note by note.

        Args:
            tag: only the notes with this tag.
        """
        chosen = notes.all(tag)
        if not chosen:
            return "No notes." if tag is None else f"No notes tagged {tag!r}."
        await ctx.info(f"summarizing {len(chosen)} notes")
        lines = []
        for done, note in enumerate(chosen):
            await ctx.report_progress(done, len(chosen), f"reading {note.title!r}")
            await trio.sleep(STEP_DELAY)  # stands for real work, e.g. asking a model
            first = note.body.split(". ")[0].rstrip(".")
            lines.append(f"- #{note.id} {note.title}: {first}.")
        await ctx.report_progress(len(chosen), len(chosen), "done")
        tags = sorted({t for note in chosen for t in note.tags})
        head = f"{len(chosen)} notes" + (f", tags: {', '.join(tags)}" if tags else "")
        return "\n".join([head, *lines])

    @server.tool(annotations={"destructiveHint": True}, output_schema=False)
    async def delete_note(ctx: Context, note_id: int, confirm: bool = False) -> str:
        """Delete a note. The user is asked to confirm unless confirm is true.

        Args:
            note_id: the note's number.
            confirm: skip the question (for clients that cannot ask the user).
        """
        note = notes.get(note_id)
        if note is None:
            raise ToolError(f"There is no note {note_id}.")
        if not confirm:
            if "elicitation" not in ctx.client_capabilities:
                raise ToolError(
                    "This client cannot ask the user to confirm; call again with confirm=true."
                )
            # In the modern era this handler runs again once the user has answered:
            # everything above is repeated, so the deletion comes after the question.
            answer = await ctx.elicit(f"Delete note {note.id}, {note.title!r}?", Confirmation)
            if answer.data is None or not answer.data.delete:
                why = {"accept": "said no", "decline": "declined", "cancel": "cancelled"}
                return f"Kept note {note.id}: the user {why[answer.action]}."
        notes.delete(note_id)
        await server.notify_resource_updated(INDEX_URI)
        await server.notify_resource_updated(note.uri)
        return f"Deleted note {note.id}, {note.title!r}."

    # ------------------------------------------------------------------ resources

    @server.resource(INDEX_URI, name="index", title="All notes", mime_type="text/markdown")
    async def index() -> str:
        """Every note: id, title and tags."""
        lines = [f"- [{n.id}] {n.title}" + "".join(f" #{t}" for t in n.tags) for n in notes.all()]
        return "\n".join(["# Notes", "", *lines]) + "\n"

    @server.resource(NOTE_TEMPLATE, name="note", title="A note", mime_type="text/markdown")
    async def note_by_id(id: int) -> str:
        """One note, as Markdown."""
        note = notes.get(id)
        if note is None:
            raise ResourceNotFound(f"notes://note/{id}")
        return note.markdown()

    # ------------------------------------------------------------------ prompts

    @server.prompt(title="Review a note")
    async def review_note(note_id: int) -> list[Message]:
        """Ask the model to review a note and suggest a better title and tags.

        Args:
            note_id: the note to review.
        """
        note = notes.get(note_id)
        if note is None:
            raise McpError.from_code(ErrorCode.INVALID_PARAMS, f"There is no note {note_id}.")
        return [
            Message.user(EmbeddedResource(note.uri, note.markdown(), "text/markdown")),
            Message.user(
                "Review the note above: is it clear and complete? "
                "Suggest a better title and up to three tags."
            ),
        ]

    # ------------------------------------------------------------------ completion

    @server.completion("ref/prompt", "review_note", "note_id")
    @server.completion("ref/resource", NOTE_TEMPLATE, "id")
    async def note_ids(request: CompletionRequest) -> list[str]:
        """Note ids whose number starts with, or whose title contains, what was typed."""
        typed = request.value.strip().lower()
        return [
            str(n.id)
            for n in notes.all()
            if str(n.id).startswith(typed) or typed in n.title.lower()
        ]

    return server

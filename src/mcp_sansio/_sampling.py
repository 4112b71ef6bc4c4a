"""Rules on the messages of ``sampling/createMessage``, as a pure function both sides use:
a server before it asks, a client before it answers (``-32602``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["sampling_messages_problem"]


def _blocks(content: Any) -> list[Any]:
    return content if isinstance(content, list) else [content]


def _kinds(content: Any) -> list[Any]:
    return [b.get("type") if isinstance(b, Mapping) else None for b in _blocks(content)]


def sampling_messages_problem(messages: Any) -> str | None:
    """What breaks the message content rules of sampling with tools, or ``None``
    (``2025-11-25/client/sampling.mdx``, "Message Content Constraints"): a message
    holding a ``tool_result`` holds nothing else, and every assistant message with
    ``tool_use`` blocks is followed at once by a user message of the results of exactly
    those uses (``toolUseId`` = ``id``)."""
    if not isinstance(messages, list):
        return None  # (the schema check says what is wrong)
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        kinds = _kinds(content)
        if "tool_result" in kinds and any(k != "tool_result" for k in kinds):
            return f"messages[{index}] mixes tool results with other content"
        if message.get("role") != "assistant" or "tool_use" not in kinds:
            continue
        uses = {
            b.get("id")
            for b in _blocks(content)
            if isinstance(b, Mapping) and b.get("type") == "tool_use"
        }
        following = messages[index + 1] if index + 1 < len(messages) else None
        results: set[Any] = set()
        if isinstance(following, Mapping) and following.get("role") == "user":
            answer = following.get("content")
            if all(k == "tool_result" for k in _kinds(answer)):
                results = {b.get("toolUseId") for b in _blocks(answer) if isinstance(b, Mapping)}
        if results != uses:
            return (
                f"messages[{index}] uses tools {sorted(map(str, uses))}: the next message "
                "must be the user's results of exactly those"
            )
    return None

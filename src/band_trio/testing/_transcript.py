"""Whether a transcript an adapter keeps is one the model's API accepts after an abort.

The conformance kit's probe "history valid after an abort mid tool-calls" reads an
adapter's conversation (`Subject.transcript`) in either API's shape: OpenAI's chat
completions (`tool_calls` of an assistant message, answered by the `tool` messages
that follow it) or Anthropic's Messages (`tool_use` blocks of an assistant message,
answered by `tool_result` blocks of the user message after it). Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["tool_calls", "transcript_problems"]


def tool_calls(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many tool calls the messages hold, in either shape."""
    return sum(len(m.get("tool_calls") or []) + len(_blocks(m, "tool_use")) for m in messages)


def transcript_problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """What makes a message list invalid for the next request: a tool call without
    exactly one result right after its message, or a result with no call.

    Either API's shape: OpenAI's (`tool_calls` of an assistant message, answered by
    the `tool` messages that follow it) or Anthropic's (`tool_use` blocks of an
    assistant message, answered by `tool_result` blocks of the user message after it)."""
    problems = []
    for i, message in enumerate(messages):
        if message.get("role") == "tool" and (i == 0 or _asker(messages, i) is None):
            problems.append(f"message {i}: a tool result with no tool call before it")
        uses = _blocks(message, "tool_use") if message.get("role") == "assistant" else []
        if uses or _blocks(message, "tool_result"):
            problems += _block_problems(messages, i, uses)
        calls = message.get("tool_calls") or []
        if message.get("role") != "assistant" or not calls:
            continue
        results = []
        for later in messages[i + 1 :]:
            if later.get("role") != "tool":
                break
            results.append(later.get("tool_call_id"))
        for call in calls:
            count = results.count(call.get("id"))
            if count != 1:
                problems.append(f"tool call {call.get('id')!r}: {count} results")
    return problems


def _blocks(message: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    """The content blocks of `kind` in a message (Anthropic's shape; none in OpenAI's)."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, Mapping) and b.get("type") == kind]


def _block_problems(
    messages: Sequence[Mapping[str, Any]], i: int, uses: list[Mapping[str, Any]]
) -> list[str]:
    """Anthropic's rule at message `i`: its `tool_use` blocks answered once each by the
    `tool_result` blocks of the user message right after it; its own results answer
    the assistant message right before it."""
    problems = []
    message = messages[i]
    if message.get("role") == "user":
        before = messages[i - 1] if i > 0 else {}
        asked = {b.get("id") for b in _blocks(before, "tool_use")}
        if before.get("role") != "assistant":
            asked = set()
        for result in _blocks(message, "tool_result"):
            if result.get("tool_use_id") not in asked:
                problems.append(f"message {i}: a tool result with no tool call before it")
        return problems
    after = messages[i + 1] if i + 1 < len(messages) else {}
    results = [b.get("tool_use_id") for b in _blocks(after, "tool_result")]
    if after.get("role") != "user":
        results = []
    for use in uses:
        count = results.count(use.get("id"))
        if count != 1:
            problems.append(f"tool call {use.get('id')!r}: {count} results")
    return problems


def _asker(messages: Sequence[Mapping[str, Any]], index: int) -> int | None:
    """The assistant message a tool result at `index` answers (through other results)."""
    for j in range(index - 1, -1, -1):
        role = messages[j].get("role")
        if role == "assistant" and messages[j].get("tool_calls"):
            return j
        if role != "tool":
            return None
    return None

"""The conversation an Anthropic adapter keeps for a room, in the Messages API's shape.

The API takes messages that alternate `user` and `assistant`, each with text or a
list of content blocks. A model that calls tools sends `tool_use` blocks in an
assistant message, and the user message right after it must answer each one
with exactly one `tool_result` block, placed before any text of that message;
otherwise the API answers 400. An interrupt or stop can land while tools run,
so the adapter keeps one entry per thing that happened (a user's message, an
answer, the results so far, a note) and repairs and merges only when it asks:

* `close_tool_uses` gives every `tool_use` without a result one that says it did
  not run (`contract.close_tool_calls` does the same for OpenAI's shape), and
  drops a result that answers nothing;
* `alternating` merges consecutive entries of one role, tool results first, into
  what the request sends;
* `trim` keeps the last entries from a user's own message on, so that no result
  loses its call.

All pure: no I/O, the input is not modified.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Msg", "alternating", "close_tool_uses", "content_blocks", "trim"]

Msg = dict[str, Any]


def content_blocks(content: object) -> list[Msg]:
    """A message's content as blocks (text is one text block; empty text, none)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [dict(block) for block in content if isinstance(block, dict)]
    return []


def _uses(message: Msg) -> list[str]:
    """The ids of an assistant message's `tool_use` blocks."""
    if message.get("role") != "assistant":
        return []
    return [
        str(block.get("id"))
        for block in content_blocks(message.get("content"))
        if block.get("type") == "tool_use"
    ]


def _is_result(block: Msg) -> bool:
    return block.get("type") == "tool_result"


def close_tool_uses(messages: Sequence[Msg], note: str) -> list[Msg]:
    """Every `tool_use` answered once, right after its message; equal to `messages`
    (copies) if it was already so.

    The user entries that follow an assistant message with tool uses are its answer:
    where one of its calls has no result there (the turn was aborted before the tool
    ran or finished), they become one user message holding the results in the calls'
    order — the missing ones with `note` as their content — then the rest of their
    blocks. A result that answers no call of the message before it, or one already
    answered, is dropped, and an entry left empty with it."""
    out: list[Msg] = []
    position = 0
    while position < len(messages):
        message = messages[position]
        ids = _uses(message)
        position += 1
        if not ids:
            blocks = content_blocks(message.get("content"))
            if message.get("role") == "user" and any(map(_is_result, blocks)):
                kept = [block for block in blocks if not _is_result(block)]
                if kept:
                    out.append({**message, "content": kept})
                continue  # results of no call
            out.append(dict(message))
            continue
        out.append(dict(message))
        answer: list[Msg] = []
        while position < len(messages) and messages[position].get("role") == "user":
            answer.append(messages[position])
            position += 1
        out.extend(_answered(ids, answer, note))
    return out


def _answered(ids: list[str], answer: list[Msg], note: str) -> list[Msg]:
    """The user entries after a message that called `ids`, with each call answered once."""
    found: dict[str, Msg] = {}
    rest: list[Msg] = []
    clean = True
    for message in answer:
        for block in content_blocks(message.get("content")):
            if not _is_result(block):
                rest.append(block)
                continue
            call = str(block.get("tool_use_id"))
            if call in ids and call not in found:
                found[call] = block
            else:
                clean = False
    if clean and len(found) == len(ids):
        return [dict(message) for message in answer]
    results = [
        found.get(call) or {"type": "tool_result", "tool_use_id": call, "content": note}
        for call in ids
    ]
    return [{"role": "user", "content": results + rest}]


def alternating(messages: Sequence[Msg]) -> list[Msg]:
    """The entries as the request sends them: consecutive entries of one role merged
    into one message (text alone stays text), a user message's tool results first."""
    out: list[Msg] = []
    for message in messages:
        role = message.get("role")
        if out and out[-1]["role"] == role:
            out[-1]["content"] = content_blocks(out[-1]["content"]) + content_blocks(
                message.get("content")
            )
        else:
            content = message.get("content")
            out.append({"role": role, "content": content_blocks(content)
                        if isinstance(content, list) else content})  # fmt: skip
    for message in out:
        content = message["content"]
        if message["role"] == "user" and isinstance(content, list):
            message["content"] = sorted(content, key=lambda block: not _is_result(block))
    return out


def trim(messages: list[Msg], limit: int) -> list[Msg]:
    """The last `limit` entries or fewer, starting at a user's own message (not one of
    tool results), so that no result loses its call. The latest exchange is kept whole
    even if it is longer."""
    if len(messages) <= limit:
        return messages
    starts = [
        i
        for i, m in enumerate(messages)
        if m.get("role") == "user" and not any(map(_is_result, content_blocks(m.get("content"))))
    ]
    fitting = [i for i in starts if len(messages) - i <= limit]
    if fitting:
        return messages[fitting[0] :]
    return messages[starts[-1] :] if starts else messages[-limit:]

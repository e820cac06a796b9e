"""Transcript integrity after an abort mid tool-calls (docs/reference/adapters.md).

A chat-completions model asks for tools in an assistant message (`tool_calls`)
and expects, for every call, one `{"role": "tool", "tool_call_id": ...}`
message right after it. An interrupt or stop can land between the two: while
a tool runs, between two tools, or while the assistant message itself is
still streaming in. The history kept for the room must still be a list the
server accepts on the next turn — OpenAI answers 400 to an unanswered call —
and the model must be able to tell a tool that ran from one that did not.

`close_tool_calls` repairs such a list; `not_run_note` is the text it gives a
call that never ran. Both are pure: no I/O, no trio, the input is not
modified, and a list that is already valid comes back equal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = ["close_tool_calls", "not_run_note"]

_VERBS = {"interrupt": "interrupted", "stop": "stopped"}


def not_run_note(kind: Literal["interrupt", "stop"], reason: str | None = None) -> str:
    """The result text of a tool call that never ran because the turn was aborted.

    `"not run: the turn was interrupted by the user"` (or `stopped`), with
    `" (reason: ...)"` when the signal carried a reason: the model reads it as
    the tool's output, so it says plainly that nothing happened and why, and
    does not look like an error of the tool. Whitespace in the reason is
    collapsed so the note stays one line.
    """
    verb = _VERBS.get(kind)
    if verb is None:
        raise ValueError(f"kind must be 'interrupt' or 'stop', not {kind!r}")
    note = f"not run: the turn was {verb} by the user"
    cleaned = " ".join((reason or "").split())
    return f"{note} (reason: {cleaned})" if cleaned else note


def close_tool_calls(
    messages: Sequence[Mapping[str, Any]],
    kind: Literal["interrupt", "stop"],
    reason: str | None = None,
    *,
    note: str | None = None,
) -> list[dict[str, Any]]:
    """Give every tool call in `messages` that has no result one that says it did not run.

    Returns a new list (the messages are shallow copies; the input is left
    alone) in which every assistant message with `tool_calls` is followed at
    once by exactly one `tool` message per call:

    * the results that exist stay, in their order, moved up to follow their
      assistant message if something else had come in between (the API wants
      them contiguous);
    * each call with no result gets one after them, in `tool_calls` order, whose
      content is `note` or else `not_run_note(kind, reason)` (`note` is for an
      abort that was not a user's signal, such as a turn deadline);
    * a `tool` message that answers no earlier call, or answers one a second
      time, is dropped: it cannot be sent, and the first answer is the one the
      model saw.

    A message cut off mid-stream is repaired the same way: a tool call without
    an `id` or a function `name`, or whose `arguments` are not a string holding
    a JSON object, never finished streaming (or is unusable), so if it has no
    result it is *removed* rather than answered — there is no call to answer,
    and servers that parse the arguments refuse the request. (A malformed call
    that does have a result was answered already and is kept.) A call whose
    `id` an earlier call already used is removed too (unless that earlier call
    was itself removed as cut off: then the id is the later call's). An
    assistant message left with no tool calls loses the key, and is dropped if
    it has no content either. Partial `content` is kept as it is: whether to keep the words of a
    cut-off answer is the caller's choice, made before it stores the message.
    """
    text = note if note is not None else not_run_note(kind, reason)
    calls, results = _index(messages)
    out: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        if message.get("role") == "tool":
            continue  # placed after the call it answers, below
        if position not in calls:
            out.append(dict(message))
            continue
        kept = calls[position]
        copy = {key: value for key, value in message.items() if key != "tool_calls"}
        if kept:
            copy["tool_calls"] = kept
        elif copy.get("content") is None:
            continue  # nothing left of it
        out.append(copy)
        answered = [results[call["id"]] for call in kept if call["id"] in results]
        answered.sort(key=lambda pair: pair[0])
        out.extend(dict(result) for _, result in answered)
        out.extend(
            {"role": "tool", "tool_call_id": call["id"], "content": text}
            for call in kept
            if call["id"] not in results
        )
    return out


def _index(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[dict[int, list[dict[str, Any]]], dict[str, tuple[int, Mapping[str, Any]]]]:
    """The calls to keep per assistant message (by position), and the first result
    of each kept call id that comes after its call (with its position).

    A call id belongs to its first call. A malformed call with no result is
    removed, which can hand its id to a later call with the same id (and that
    call's results), so this repeats until nothing more is removed."""
    removed: set[tuple[int, int]] = set()
    while True:
        calls: dict[int, list[dict[str, Any]]] = {}
        slots: dict[int, list[int]] = {}
        owner: dict[str, int] = {}
        results: dict[str, tuple[int, Mapping[str, Any]]] = {}
        for position, message in enumerate(messages):
            role = message.get("role")
            if role == "tool":
                call_id = message.get("tool_call_id")
                if isinstance(call_id, str) and call_id in owner and call_id not in results:
                    results[call_id] = (position, message)
            elif role == "assistant" and "tool_calls" in message:
                raw = message["tool_calls"]
                calls[position], slots[position] = [], []
                for slot, entry in enumerate(raw if isinstance(raw, list) else []):
                    call_id = entry.get("id") if isinstance(entry, Mapping) else None
                    if (position, slot) in removed or not isinstance(call_id, str) or not call_id:
                        continue
                    if call_id not in owner:
                        owner[call_id] = position
                        calls[position].append(dict(entry))
                        slots[position].append(slot)
        more = {
            (position, slot)
            for position, kept in calls.items()
            for call, slot in zip(kept, slots[position], strict=True)
            if call["id"] not in results and not _complete(call)
        }
        if not more:
            return calls, results
        removed |= more


def _complete(call: Mapping[str, Any]) -> bool:
    """Whether a tool call finished streaming: a name, and arguments that are a JSON object."""
    function = call.get("function")
    if not isinstance(function, Mapping):
        return False
    name = function.get("name")
    arguments = function.get("arguments")
    if not isinstance(name, str) or not name or not isinstance(arguments, str):
        return False
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return False
    return isinstance(parsed, dict)

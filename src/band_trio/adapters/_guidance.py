"""Guidance as a reference adapter hands it to its model: the room's messages a running
turn took (`Turn.take_guidance`, in a `WhileBusy.STEER` room), each as a user message
that says who sent it and that it came while the work was under way.

Attributed because the model otherwise reads it as more of the turn's own message,
from the same person; marked as arriving mid-turn because it may change or cancel
what the turn set out to do ("use the other file", "stop after the first step").

Taken only between model calls — after a round's tool results, before the next
request — never into a stream: a chat completion cannot take input once asked.
"""

from __future__ import annotations

from typing import Any

from ..contract import Message, Turn

__all__ = ["add_guidance", "guidance_text"]


def guidance_text(message: Message) -> str:
    """What the model reads for one message of guidance."""
    who = message.sender_name or message.sender_id
    return f"{who} added, while you were working on this: {message.content}"


def add_guidance(turn: Turn, messages: list[dict[str, Any]]) -> int:
    """Take the guidance offered to `turn` and append it to a chat conversation, one
    user message each; how many were taken (0 outside a STEER room)."""
    taken = turn.take_guidance()
    messages.extend({"role": "user", "content": guidance_text(m)} for m in taken)
    return len(taken)

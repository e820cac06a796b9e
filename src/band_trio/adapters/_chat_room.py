"""A chat adapter's memory of one room: the conversation it sends the model each turn,
kept in step with the room across failures and aborts.

The OpenAI-compatible and the Anthropic adapters keep a room the same way; only
their transcripts' shapes differ (how a cut tool call is closed, how the history is
trimmed), and those they pass in:

* a turn appends the room's message (not on a replay: it is there already), asks
  the model, posts the answer;
* a turn that fails takes its exchange back out, as if it had never happened;
* a turn that is aborted leaves its exchange as it stood and marks the room `cut`:
  the next turn closes what it left open and tells the model why
  (the adapter's `settle_abort`), since only it knows what the abort was;
* the history is trimmed after every turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..contract import Turn

__all__ = ["ChatRoom", "answer_in_room"]

Msg = dict[str, Any]


@dataclass(slots=True)
class ChatRoom:
    messages: list[Msg] = field(default_factory=list)
    cut: str | None = None
    """The message whose turn was aborted, until the model has been told."""


async def answer_in_room(
    room: ChatRoom,
    turn: Turn,
    *,
    replay: bool,
    converse: Callable[[Turn, list[Msg]], Awaitable[str]],
    trim: Callable[[list[Msg]], list[Msg]],
) -> None:
    """One turn of a chat adapter in `room` (see the module); `replay`: the turn answers
    the message an earlier turn was aborted on, which the history holds already."""
    base = len(room.messages)
    if not replay:
        room.messages.append({"role": "user", "content": turn.message.content})
    try:
        answer = await converse(turn, room.messages)
        await turn.reply(answer)
    except Exception:
        del room.messages[base:]  # failed, not aborted: as if the exchange never happened
        raise
    except BaseException:
        room.cut = turn.message.id  # closed by the next turn, which knows why
        raise
    finally:
        room.messages[:] = trim(room.messages)
